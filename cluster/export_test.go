package cluster

// InTopology reports whether member id is in the latest cluster topology
// the front processed (provider membership only). By then protoactor has
// also updated its block list for members that left.
func InTopology(c *Client, id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.members[id]
}

// Where returns the member id of the executor this front last found
// conversation conv on ("" when it knows none).
func Where(c *Client, conv string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.placed[conv].execID
}

// Prefers reports whether rendezvous hashing places a new conversation
// conv on the executor with member id a rather than on the one with b.
func Prefers(conv, a, b string) bool { return score(conv, a) > score(conv, b) }
