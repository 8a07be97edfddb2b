package proc

// WaitRenewals waits for the background removals and renewals of m's
// cgroups (RecycleEmpty renews some parts off the caller).
func (m *Cgroups) WaitRenewals() { m.pending.Wait() }
