package cluster

import "sync"

// Assignment says where a conversation runs.
type Assignment struct {
	// ExecutorID is the executor's member id (new on every start of its
	// process, so an assignment never outlives the process).
	ExecutorID string
	// Name and Address describe it for texts and logs.
	Name, Address string
	// Generation counts the executors the conversation has had (1 for
	// the first). Job ids from generation 2 on are prefixed "gN." so they
	// cannot be confused with the lost jobs of an earlier executor.
	Generation int
}

// Placement is the table of conversations to executors. The front keeps
// it in memory by default ([NewMemoryPlacement]); an embedder that runs
// several fronts, or restarts its front, supplies a durable one (a
// database row per conversation). Calls are serialized by the Client.
type Placement interface {
	// Get returns the conversation's assignment, if it has one.
	Get(conversationID string) (Assignment, bool, error)
	// Put records it.
	Put(conversationID string, a Assignment) error
	// Delete forgets it (EndConversation).
	Delete(conversationID string) error
	// DirSurvives reports whether the conversation's working directory
	// outlives the loss of the executor it was on (shared storage, a
	// volume that can be attached elsewhere). When it does, the
	// conversation moves to another executor; when not, its next calls
	// fail with ErrConversationLost.
	DirSurvives(conversationID string, lost Assignment) bool
}

// MemoryPlacement is an in-memory Placement.
type MemoryPlacement struct {
	// SharedDirs says that working directories survive an executor's loss
	// (every executor mounts the same storage).
	SharedDirs bool

	mu sync.Mutex
	m  map[string]Assignment
}

// NewMemoryPlacement returns an empty in-memory placement table.
func NewMemoryPlacement() *MemoryPlacement { return &MemoryPlacement{m: map[string]Assignment{}} }

// Get implements Placement.
func (p *MemoryPlacement) Get(conv string) (Assignment, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	a, ok := p.m[conv]
	return a, ok, nil
}

// Put implements Placement.
func (p *MemoryPlacement) Put(conv string, a Assignment) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.m[conv] = a
	return nil
}

// Delete implements Placement.
func (p *MemoryPlacement) Delete(conv string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.m, conv)
	return nil
}

// DirSurvives implements Placement: SharedDirs.
func (p *MemoryPlacement) DirSurvives(string, Assignment) bool { return p.SharedDirs }
