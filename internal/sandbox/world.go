package sandbox

import (
	"github.com/bashvisor/bashvisor/config"
)

// A World is what the sandboxed commands of one conversation share, and no
// other conversation sees:
//
//   - one loopback network: a network namespace with only a loopback
//     interface, kept by the world, which every command of the
//     conversation joins. A server a command starts in the background
//     (python3 -m http.server 3000 &) is reachable by the next command
//     (curl localhost:3000); other conversations and the host cannot reach
//     it, and two conversations can both listen on the same port. Commands
//     may create TCP sockets, bind, listen and connect there: the
//     namespace has nothing else, so the boundary is the namespace (no
//     UDP, raw, packet, netlink or unix sockets: seccomp). A command with
//     [Options.Network] gets its egress proxy's listener in this network,
//     and NO_PROXY names loopback so that its local servers are reached
//     directly. With [Options.Carry] it also gets, while it runs, a slot
//     of the network of its own: a resolver on 127.0.n.1:53 (UDP and TCP;
//     its /etc/resolv.conf reads "nameserver 127.0.n.1" and "options
//     use-vc", no search domains) and a listener on 127.0.n.2 for each
//     carried port, n the lowest slot no other running command of the
//     conversation holds (0 for the first: 127.0.0.1:53 and 127.0.0.2). Since commands share the network, a command can use the
//     proxy of another command of the same conversation while that one
//     runs, and so reach what its allowlist allows: the allowlist is the
//     conversation's, in effect;
//   - one file system of its own (a tmpfs of [WorldOptions.Bytes] and
//     [WorldOptions.Files]), which is every command's /tmp ($TMPDIR) and
//     holds the build and package caches ([World.CacheDir]): it persists
//     across the conversation's commands, fills up with ENOSPC, and is
//     gone with the world (its memory is freed when the last command that
//     still runs in it ends). A cache with a base ([config.BaseCaches]:
//     the user's own caches, such as `go env GOCACHE`) is an overlay
//     whose lower layer is the base and whose upper layer is on the
//     world's file system, mounted at the base's own path in the world,
//     so the commands' tools find it where the user's environment says,
//     a conversation's first go build is warm (the build cache keys on
//     those paths), and what it adds costs the world's quota; see
//     "Caches" in the package doc;
//   - what it does not see: the engine's state ([WorldOptions.Hide], the
//     engine's output root with every conversation's job files, the cache
//     root, the layer and undo directories) is covered in every command's
//     mount namespace by an empty read-only directory, with only the
//     conversation's own directories shown again ([WorldOptions.Show]
//     read-only, the world's caches read-write).
//
// Paths below /tmp that a command must see (its writable roots, the
// conversation's own output directory and caches when the engine keeps them
// below /tmp) are mounted at their own paths inside the world's /tmp, whose
// directories they need are made there (empty).
//
// As root the world's namespaces are made on a throwaway thread of the
// engine. Any other user gets them from a user namespace of the world's
// own, made by a short-lived child (the helper program, see [Main]) that
// hands them to the engine; each command's process joins that user
// namespace before it execs the helper, which mounts the command's view
// (Rootless). A world is safe for concurrent use.
type World struct {
	w *world
}

// WorldOptions describe a conversation's world.
type WorldOptions struct {
	// Dir is the world's directory, made if missing (0700): its file
	// system is mounted there in the commands' namespaces (the engine sees
	// an empty directory). The caches are below it (see [World.CacheDir]);
	// it should lie in a Hide directory, so that no other conversation's
	// commands see it.
	Dir string
	// Bytes and Files bound the world's file system: its /tmp and what its
	// caches add to their bases (0: the defaults of
	// config.SandboxLimits.ScratchBytes and ScratchFiles).
	Bytes, Files uint64
	// BaseCaches are the caches' read-only starting points (empty fields:
	// the cache starts empty). A base that does not exist is made, empty,
	// as its tool would; one that cannot be made (a HOME that is not
	// writable, such as /nonexistent) is taken as an empty field, instead
	// of failing every command of the world.
	BaseCaches config.BaseCaches
	// Hide are directories of the engine that no command of the world
	// sees: each is covered by an empty read-only directory.
	Hide []string
	// Show are directories below Hide that the world's commands see
	// read-only at their paths (the conversation's own output directory).
	// One that does not exist when a command starts is left out.
	Show []string
	// Helper is the program that makes a rootless world (one whose main
	// calls [Main] first); empty means the running executable.
	Helper string
}

// CacheDir is the directory of the world's caches: those with a base
// are mounted again at the base's path, those without are where the
// commands' GOCACHE, npm_config_cache, PIP_CACHE_DIR (and, with no base
// at all, XDG_CACHE_HOME) point. Only the world's commands see what it
// holds.
func (w *World) CacheDir() string { return w.w.dir + "/cache" }

// Rootless reports whether the world's namespaces belong to a user
// namespace of its own (the engine is not root).
func (w *World) Rootless() bool { return w.w.rootless }
