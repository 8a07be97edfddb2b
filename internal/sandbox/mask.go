package sandbox

// Mask shows a command a file of the caller's in place of one of the
// host's, read-only, in the command's private mount namespace (a bind
// mount; it needs private namespaces, and is left out without them): the
// egress broker's CA bundle over the system's, a placeholder over a file
// that holds a secret.
type Mask struct {
	// Path is the file the command sees replaced. A symbolic link is
	// followed (the file it names is replaced); a path that does not
	// exist is left out (nothing is created).
	Path string `json:"path"`
	// Source is the file whose content the command sees at Path, read
	// when the command's namespace is made, before the engine's
	// directories are hidden from it: it may lie in one of them. It must
	// be readable by the engine's user (rootless: by the helper).
	Source string `json:"source"`
}
