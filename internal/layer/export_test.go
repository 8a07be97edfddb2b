//go:build linux

package layer

// StoreBusy reports whether an apply or undo of st holds its turn.
func StoreBusy(st *Store) bool { return len(st.mu) == 1 }
