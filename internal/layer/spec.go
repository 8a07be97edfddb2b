package layer

// The types a process other than the engine needs to mount a layer. They
// are declared on every platform, so that a configuration can carry them
// (package sandbox's Options); everything else is Linux-only.

// Spec is what mounting a layer takes, for a process other than the
// one that made it (the sandbox's helper gets it in its JSON config).
type Spec struct {
	// Overlays are the overlays to mount, outer roots first.
	Overlays []Overlay `json:"overlays"`
	// UserXattr is [Options.UserXattr].
	UserXattr bool `json:"userxattr,omitempty"`
}

// Overlay is one overlay of a [Spec].
type Overlay struct {
	// Root is the real directory: the lower layer and the mount point.
	Root string `json:"root"`
	// Upper and Work are the overlay's upper and work directories.
	Upper string `json:"upper"`
	Work  string `json:"work"`
}
