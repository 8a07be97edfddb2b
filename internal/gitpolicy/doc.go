// Package gitpolicy decides which changes of a sandboxed command may
// reach the real workspace, so that nothing the command leaves behind
// makes git run a program later, outside the sandbox (when the user's
// shell prompt or editor runs git status, or the user runs git commit,
// git restore . or git rebase --continue), or points git at files the
// command chose. It judges a change set ([layer.Set]) as a whole, and
// returns the changes that are not applied on their own ([Refusal],
// one rule and a one-line reason each).
//
// # The tree apply will produce
//
// Every change is judged against the tree as it will be after apply,
// not as the command left it: once some changes are refused, the whole
// set is judged again with them left out (a refused deletion keeps
// what it would have removed, a refused addition is absent), until no
// more are refused. A directory that becomes a repository only because
// a deletion in it was refused is therefore judged as one.
//
// # Repositories
//
// Repositories are found by content, as git's discovery finds them, in
// the tree before and after, at any depth below the layer's roots: a
// directory named .git (or a name git reads as .git on some file
// system), a directory holding HEAD and either commondir or objects and
// refs (a bare repository, also one planted in a working tree; a
// linked worktree's admin directory; a submodule's git directory), and
// the git directory a .git file names ("gitdir: ...", and a commondir
// file: where the kernel resolves it, as git takes its real path; a ..
// after a symlink leaves the symlink's target: TestGitdirThroughSymlink).
//
// # Inside a git directory: inert data only
//
// A change inside a git directory applies on its own only when it is
// provably inert data, each kind checked by content, not by name:
//
//   - objects: a loose object must inflate to "type size\0" and content
//     whose hash (SHA-1, or SHA-256 when extensions.objectFormat says
//     so) is its name; a pack and its index must verify as git
//     verify-pack checks their integrity (the index's signature,
//     fan-out, size and checksum, the pack's signature, version, object
//     count and trailer, and the index's copy of that trailer);
//     commit-graph, multi-pack-index, .rev, .bitmap and .mtimes files
//     their signature and checksum; .keep and .promisor files,
//     info/packs are text. Packs and checksummed files are read once
//     through their hash, in constant memory, whatever their size (one
//     with holes, which git never writes, is refused unread), and
//     loose objects inflated through theirs.
//     Objects are data whatever they hold: git never runs an object.
//     The checks parse the files here rather than run git index-pack:
//     the engine need not have git, and git reading the command's files
//     is what the policy guards against.
//   - refs/ and packed-refs: names that pass git's check_refname_format,
//     contents an object id or "ref: refs/..." (packed-refs: its header,
//     "<id> <ref>" and "^<id>" lines); logs/: reflog lines of two object
//     ids; HEAD, NOTES_MERGE_REF and any other upper-case X_HEAD: an
//     object id or a symbolic ref below refs/; ORIG_HEAD, MERGE_HEAD,
//     CHERRY_PICK_HEAD, REVERT_HEAD, REBASE_HEAD, AUTO_MERGE,
//     BISECT_HEAD, shallow and similar: object ids; FETCH_HEAD: git's
//     lines; info/refs: "<id>\t<ref>" lines.
//   - the index and every split, shared or temporary index: parsed as
//     git reads it (package gitindex: versions 2 to 4, checksum, name
//     lengths as the flags give them, git's varint, and every extension
//     git knows: the cache tree (whose valid nodes must name the trees
//     the entries make, a split index's merged with its shared index's:
//     git commit writes them without reading the entries), resolve-undo,
//     the split index's link,
//     the untracked cache, fsmonitor's token and bitmap, the offsets of
//     EOIE and IEOT agreeing with the entries, so that git's threaded
//     loader reads what the serial one does; an unknown required one is
//     refused); every path of its entries, of its resolve-undo
//     extension, of its cache tree's directories and of its untracked
//     cache's directories and files passes git's verify_path with the
//     NTFS and HFS+ checks on (no absolute path, no drive letter, no empty, . or ..
//     component, no .git component in any spelling: case, trailing dots
//     and spaces, git~1, "::$INDEX_ALLOCATION" streams, code points
//     HFS+ ignores, backslashes as separators; no symlink named
//     .gitmodules), and no gitlink names a directory whose repository
//     is new; the untracked cache's exclude file is .gitignore (the
//     engine applies an index without the untracked cache and
//     fsmonitor's data, which cannot be checked: package transact).
//     MERGE_RR's paths (rerere writes them) pass verify_path
//     too; rr-cache/ holds rerere's images.
//   - the states of rebase, am and the sequencer: each file git writes
//     there, checked: todo lists hold comments and git's commands but
//     exec (update-ref with a valid ref name); merge strategies are
//     git's (ort, recursive, resolve, octopus, ours, subtree) and
//     their options git's (-X ours, theirs, subtree, renormalize, ...,
//     no value with .. or a leading /); sequencer/opts parses as config
//     with only the keys git writes there (no gpg-sign: signing runs
//     gpg); am's apply-opt only git apply's options; the rest are
//     object ids, messages, numbers and author scripts git parses
//     itself.
//   - messages and other files git reads as text or as its own
//     arguments: COMMIT_EDITMSG, MERGE_MSG, SQUASH_MSG, TAG_EDITMSG,
//     description, BISECT_* logs and terms, gc.pid, gc.log.
//   - hooks/*.sample (git never runs them); an empty hooks/, info/ and
//     branches/ and info/exclude with comments only in a new repository.
//   - config and config.worktree: see Configuration.
//   - a linked worktree's admin directory that git worktree add makes:
//     a new directory below worktrees/ whose commondir is "../.." and
//     whose gitdir names a new .git file below the roots that names it
//     back; it is checked whole like any new git directory.
//
// Everything else in a git directory is refused, with the rule that
// names it: hooks ([Hooks]), commondir ([Commondir]) and gitdir
// ([Gitdir]) files but git worktree add's, modules/ ([Modules]),
// worktrees/ admin files ([Worktrees]), info/ ([Info]), alternates
// ([Alternates]), symlinks ([Symlink]), removing the repository, its
// HEAD, objects or refs ([Structure]), content that fails its check
// ([Index], [Ref], [Object], [RebaseExec]), and any file git does not
// write there, reftable/ and remotes/ included ([Unknown]) — creations,
// changes and removals alike.
//
// A git directory that is new (not one before the command) is checked
// whole, as it is afterwards, not only what the command changed: it
// may have been filled while it was not yet a git directory. If
// anything in it is refused, every change in it is, so it does not
// become a repository in the real tree; where it sits is then judged by
// the git directory around it (a new one below modules/ is refused
// there).
//
// # Configuration
//
// A repository's effective configuration is its config and
// config.worktree (also its common directory's) and every file they
// include, with include.path and includeIf.*.path resolved relative to
// the including file and every includeIf condition taken as true, also
// into working trees (include.path = ../.gitconfig). A change of any of
// these files applies only when it stays a regular file that parses
// and every variable it holds afterwards that it did not hold before is
// a key that runs nothing with a value of its kind (user.*,
// author.*, committer.*, remote.*.url and pushurl without a transport
// helper or a leading -, remote.*.fetch, branch.*, submodule.*.url and
// active, core.repositoryformatversion, core.filemode, core.bare,
// core.logallrefupdates, core.ignorecase, core.precomposeunicode,
// core.autocrlf, extensions.objectformat, rerere.enabled, pull.rebase,
// ...); every other key — core.fsmonitor, core.hooksPath, core.pager,
// core.editor, core.sshCommand, core.worktree, include.*, alias.*,
// filter, diff and merge drivers, credential helpers, gpg.program,
// remote.*.uploadpack, ... — refuses it ([Config]; [NewConfig] for a
// new repository's config, all of whose keys must run nothing).
//
// What an effective configuration names as code is protected like the
// git directory's own: files in the core.hooksPath directory like hooks
// ([Hooks]), included files and core.attributesFile like the config
// ([Config]), and, when it defines a filter, diff or merge driver, the
// .gitattributes files of its working tree, which select drivers
// ([Config]); the files its program-valued keys (core.fsmonitor,
// core.pager, core.editor, core.sshCommand, diff.external, ! aliases
// and credential helpers, drivers, ...) name by a path, relative ones
// below the working tree, where git runs them ([Config]; the user's
// relative ones below every working tree; ~name is name's home). The
// hooks directories and program files are matched also where they
// resolve through symlinks in the tree apply will produce, and a change
// that makes a directory on the way to one a symlink is refused: it
// moves the code without changing it. A path is resolved as the kernel
// resolves it, component by component, a .. after the symlinks before
// it (tools/../hooks is a/hooks when tools is a symlink to a/b; ~/../x
// follows a home that is a symlink first), and an included file is read
// where it so resolves. Configurations are read for every repository around a
// change (the directories above it and their .git) before and after the
// command, for the first repository above the layer's roots (one
// that encloses the workspace: what it names there is code too), and
// for every repository anywhere below a root that holds changes before
// the command (a sibling repository's core.hooksPath = ../hooks names
// code outside it that no change is inside). Those are found by a walk
// of the tree (no symlink followed, no git directory entered, but a
// .git that is a symlink names the directory or gitdir: file it
// resolves to, as git follows it: TestDotGitSymlink; a bare
// repository's relative hooks path starts in it, where git runs its
// hooks; .GIT, or Head, objects and REFS, are looked up as git looks
// up .git or HEAD: a case-insensitive directory finds them) that runs
// while the command does: [Prefetch], called when the
// command's transaction begins, walks its roots, and again every 10 s
// until its changes are checked; the check waits for the walk begun
// after the latest Prefetch of the root (without one, it walks itself).
// A root's first walk reads every directory; later ones stat each
// directory and read only those whose change time, device or inode
// changed, or that changed within 2 s of the last walk (timestamps are
// coarse) (BenchmarkWalk). A repository that a process outside the
// sandbox makes or moves in while the command runs, after the walk
// passed its directory, is read at the next command's check; one made
// between two commands at the second's
// (TestRepositoryAddedBetweenCommands). Its configuration, and a .git
// file's gitdir:, are read afresh at every check; a repository a
// sandboxed command makes keeps settings that run nothing.
//
// The walk fails closed. One that did not look everywhere — it reached
// 1,000,000 directories (a directory's names cost little to read, each
// directory an open and a read, or a stat to revalidate), or could not
// open, stat or read a directory (one gone or replaced by a
// non-directory meanwhile holds no repository) — may have missed a
// repository that names any file below its root as code, so every
// change below that root but data inside a git directory that existed
// before is held for a person's review, with the reason ([Walk]: "the
// workspace has more than 1000000 directories; repositories in it
// could not all be found", or the directory that could not be read:
// TestRuleWalk, TestWalkUnreadableDirectory). The directories it did
// read are kept, so the next walk revalidates them.
//
// The user's own configuration is part of every repository's effective
// configuration, found as the user's git finds it with the environment
// it runs in ([CheckEnv]; [Check] takes the engine's): the system file
// (GIT_CONFIG_SYSTEM or /etc/gitconfig, unless GIT_CONFIG_NOSYSTEM is
// true as git reads a boolean: yes, on, true, a non-zero number),
// the global ones (GIT_CONFIG_GLOBAL, or $XDG_CONFIG_HOME/git/config and
// ~/.gitconfig) with what they include, and the variables the
// environment sets, parsed as git parses them: GIT_CONFIG_COUNT's
// GIT_CONFIG_KEY_n/VALUE_n (every n below the count, however spelled)
// and GIT_CONFIG_PARAMETERS (what `git -c` passes on: 'key=value' and
// 'key'='value' items in shell single quotes), with the files they
// include. A command's own environment is not read: it ends with the
// command, and the user's later git does not see it. What it names is protected the same way: a global
// core.hooksPath = .githooks makes .githooks/ in every working tree
// hooks, an absolute one or one below ~ its directory; an included file
// is configuration; a driver it defines makes every working tree's
// .gitattributes select programs. Where a root holds these files (the
// workspace is HOME), a change of one is judged like a repository's
// configuration ([Config]).
//
// # Working trees
//
// Outside every git directory: a .git that is not a directory — a
// "gitdir:" file or a symlink — may not be created, changed or removed
// ([GitFile]), but for the one git worktree add writes; no entry may be
// named what git reads as .git elsewhere ([DotGit]); a .gitmodules must
// parse and have no update = !command, URL that reads as an option or
// names a transport helper, or name or path that leaves the tree
// ([Gitmodules]); a directory that holds a repository may not be
// removed or replaced ([Structure]). Working-tree files git reads but
// that run nothing without configuration (.gitattributes, .gitignore,
// .mailmap) are data.
//
// # Limits
//
// A small file checked by content (a ref, a state file, a config) is
// read up to 1 MiB, an index, a reflog or a loose object's content up
// to 128 MiB (packs have no limit: a clone's pack applies); a larger
// one is refused, as is a new repository of more than 200,000 entries
// and a removed directory of more than 1,000,000 searched for
// repositories. Each directory above a change is looked at once per
// judgement, and entries of directories the command added are known
// from the change list, so the cost grows with the number of changes,
// not with the depth of the tree.
//
// Not covered: a repository outside the layer's roots (but the first
// one above them) whose configuration names code inside them (a
// repository beside the workspace with core.hooksPath =
// ../workspace/hooks) is not found: nothing looks outside the roots
// but above them. Files that other tools run (Makefiles, package.json
// scripts, .envrc, editor settings) are the project's code, which the
// user reviews like any change; the change report names them.
package gitpolicy
