package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bashvisor/bashvisor/engine"
)

// A client names the conversation of a request with the HTTP header
// conversationHeader or the _meta key metaConversation (both: they must
// agree). The name is 1 to 128 of A-Z a-z 0-9 . _ -, starting with a
// letter or digit. See the package documentation, "Conversations".
const (
	conversationHeader = "Bashvisor-Conversation"
	metaConversation   = "bashvisor/conversation"
)

// Defaults of Options, stated at each field.
const (
	defaultConversationIdle             = 30 * time.Minute
	defaultMaxConversations             = 1024
	defaultMaxConversationsPerPrincipal = 256
)

// defaultConversationRate is Options.ConversationRate's default.
var defaultConversationRate = Rate{PerSecond: 4, Burst: 64}

// validConversationName reports whether name is a conversation name a client
// may choose: 1 to 128 of A-Z, a-z, 0-9, '.', '_' and '-', starting with a
// letter or digit. (Checked by hand: the regular expression compiled at
// every start of every program that links this package, 0.5 ms.)
func validConversationName(name string) bool {
	if len(name) == 0 || len(name) > 128 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// sessionMark starts the name of a session's conversation ("~1f0c…"): no
// client-chosen name starts with it, so a name never reaches a session's
// conversation.
const sessionMark = "~"

// errNoPrincipal refuses a request that came over HTTP without passing
// through Handler (which names its principal): serving it would put it
// in the local principal's conversations.
var errNoPrincipal = errors.New("this request came over HTTP without a principal: serve the server with mcpserver.Handler")

// scope is who makes a call and in which conversation.
type scope struct {
	principal string
	conv      string             // the engine's conversation id
	name      string             // the conversation's name within the principal (resource URIs)
	session   *mcp.ServerSession // the session whose end ends the conversation, or nil
	named     bool               // a named conversation, ended when idle
}

// conversationName returns the conversation a request names, "" for none.
func conversationName(req mcp.Request) (string, error) {
	var fromMeta, fromHeader string
	if p := req.GetParams(); p != nil && !reflect.ValueOf(p).IsNil() {
		if v, ok := p.GetMeta()[metaConversation]; ok {
			s, isString := v.(string)
			if !isString {
				return "", fmt.Errorf("%w: _meta[%q] must be a string", engine.ErrBadInput, metaConversation)
			}
			fromMeta = s
		}
	}
	if extra := req.GetExtra(); extra != nil && extra.Header != nil {
		fromHeader = extra.Header.Get(conversationHeader)
	}
	name := fromMeta
	switch {
	case fromMeta != "" && fromHeader != "" && fromMeta != fromHeader:
		return "", fmt.Errorf("%w: the %s header (%q) and _meta[%q] (%q) name different conversations",
			engine.ErrBadInput, conversationHeader, clip(fromHeader, 140), metaConversation, clip(fromMeta, 140))
	case name == "":
		name = fromHeader
	}
	if name != "" && !validConversationName(name) {
		return "", fmt.Errorf("%w: conversation name %q: use 1 to 128 of A-Z a-z 0-9 . _ -, starting with a letter or digit",
			engine.ErrBadInput, clip(name, 140))
	}
	return name, nil
}

// principalOfRequest returns the principal of a request: the one Handler
// gave it, else (stdio, in-memory) Options.Principal. http reports the
// former.
func (s *server) principalOfRequest(ctx context.Context, req mcp.Request) (p string, http bool, err error) {
	if p, ok := principalFrom(ctx); ok {
		return p, true, nil
	}
	if extra := req.GetExtra(); extra != nil && extra.Header != nil {
		return "", false, errNoPrincipal
	}
	return s.o.Principal, false, nil
}

// scopeOf resolves who makes req and in which conversation (see the
// package documentation, "Conversations").
func (s *server) scopeOf(ctx context.Context, req mcp.Request) (scope, error) {
	p, overHTTP, err := s.principalOfRequest(ctx, req)
	if err != nil {
		return scope{}, err
	}
	name, err := conversationName(req)
	if err != nil {
		return scope{}, err
	}
	ss, _ := req.GetSession().(*mcp.ServerSession)
	sc := scope{principal: p, name: name}
	switch {
	case name != "" && name != s.o.ConversationID:
		sc.named = true
	case s.o.SharedConversation || !overHTTP || ss == nil || ss.ID() == "":
		// The principal's own conversation: stdio's, the shared one, and
		// a stateless request's that names none.
		sc.name = s.o.ConversationID
	default:
		sum := sha256.Sum256([]byte(ss.ID()))
		sc.name = sessionMark + hex.EncodeToString(sum[:8])
		sc.session = ss
	}
	sc.conv = s.conversationID(p, overHTTP, sc.name)
	return sc, nil
}

// conversationID is the engine's id of conversation name of principal p:
// over HTTP the principal (path-escaped, so without "/") and the name,
// "alice/build"; over stdio, with its one principal, ConversationID itself
// for the default conversation and ConversationID/NAME for a named one.
func (s *server) conversationID(p string, overHTTP bool, name string) string {
	if !overHTTP {
		if name == s.o.ConversationID {
			return name
		}
		return s.o.ConversationID + "/" + name
	}
	return url.PathEscape(p) + "/" + name
}

// toolContext is the context of a call in scope sc.
func (s *server) toolContext(sc scope) engine.ToolContext {
	tc := engine.ToolContext{
		WorkingDir:     s.o.WorkingDir,
		ConversationID: sc.conv,
		Principal:      sc.principal,
		Sandbox:        s.o.Sandbox,
		Env:            s.o.Env,
	}
	s.grantsMu.Lock()
	if g := s.grants[sc.conv]; len(g) > 0 {
		tc.Sandbox.Network = append(slices.Clip(tc.Sandbox.Network), g...)
	}
	s.grantsMu.Unlock()
	return tc
}

// grant adds hosts a person approved to conversation conv's network for
// its later calls (see server.grants).
func (s *server) grant(conv string, hosts []string) {
	s.grantsMu.Lock()
	defer s.grantsMu.Unlock()
	if s.grants == nil {
		s.grants = map[string][]string{}
	}
	g := slices.Clone(s.grants[conv]) // toolContext's copies share no array with it
	for _, h := range hosts {
		if !slices.Contains(g, h) {
			g = append(g, h)
		}
	}
	s.grants[conv] = g
}

// conversations tracks the conversations that end without the engine
// being told by a client: session conversations (ended with their
// session) and named ones (ended when idle).
type conversations struct {
	s     *server
	mu    sync.Mutex
	named map[string]*namedConversation
	// perPrincipal counts the named conversations in use by principal;
	// rate is each principal's rate of opening new ones.
	perPrincipal map[string]int
	rate         *rates
	// bound holds the sessions whose conversation ends with them
	// (*mcp.ServerSession → struct{}), from their first call until their
	// conversation is ended.
	bound sync.Map
}

// namedConversation is a named conversation in use.
type namedConversation struct {
	principal string
	calls     int         // calls in flight
	timer     *time.Timer // ends the conversation once idle
}

// enter records a call in sc's conversation; the returned function records
// its end. A named conversation idle for Options.ConversationIdle ends
// (its commands and jobs end); a session's ends with the session.
func (c *conversations) enter(sc scope) (leave func(), err error) {
	switch {
	case sc.session != nil:
		c.bindSession(sc.session, sc.conv)
		return func() {}, nil
	case !sc.named:
		return func() {}, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.named[sc.conv]
	if n == nil {
		if err := c.admit(sc.principal); err != nil {
			return nil, err
		}
		n = &namedConversation{principal: sc.principal}
		c.named[sc.conv] = n
		c.perPrincipal[sc.principal]++
	} else if n.timer != nil {
		n.timer.Stop()
		n.timer = nil
	}
	n.calls++
	return func() { c.leave(sc.conv, n) }, nil
}

func (c *conversations) leave(conv string, n *namedConversation) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n.calls--
	if n.calls > 0 || c.s.o.ConversationIdle < 0 {
		return
	}
	n.timer = time.AfterFunc(c.s.o.ConversationIdle, func() {
		c.mu.Lock()
		if c.named[conv] != n || n.calls > 0 {
			c.mu.Unlock()
			return
		}
		delete(c.named, conv)
		if c.perPrincipal[n.principal]--; c.perPrincipal[n.principal] <= 0 {
			delete(c.perPrincipal, n.principal)
		}
		c.mu.Unlock()
		c.s.endConversation(conv, "idle named conversation")
	})
}

// admit refuses a new named conversation of principal p over
// Options.MaxConversations, MaxConversationsPerPrincipal or
// ConversationRate (an error matching engine.ErrBusy); c.mu is held.
func (c *conversations) admit(p string) error {
	o := c.s.o
	if max := o.MaxConversations; max > 0 && len(c.named) >= max {
		return fmt.Errorf("%w: %d named conversations are open, the most this server allows; retry later, or reuse a conversation", engine.ErrBusy, max)
	}
	if max := o.MaxConversationsPerPrincipal; max > 0 && c.perPrincipal[p] >= max {
		return fmt.Errorf("%w: principal %q has %d named conversations open, the most one principal may; reuse one, or retry once one was idle for %s",
			engine.ErrBusy, p, c.perPrincipal[p], o.ConversationIdle)
	}
	if ok, retry := c.rate.allow(p); !ok {
		return fmt.Errorf("%w: principal %q opens named conversations faster than this server allows (%g a second, in bursts of %d); retry in %s, or reuse one",
			engine.ErrBusy, p, o.ConversationRate.PerSecond, o.ConversationRate.Burst, retry.Round(100*time.Millisecond))
	}
	return nil
}

// bindSession makes the conversation of session ss end when ss ends. The
// first call binds it: a goroutine waits for the session to close, which
// happens only after its last call returned, so no job can start after
// the conversation ended.
func (c *conversations) bindSession(ss *mcp.ServerSession, conv string) {
	if _, loaded := c.bound.LoadOrStore(ss, struct{}{}); loaded {
		return
	}
	go func() {
		defer c.bound.Delete(ss)
		_ = ss.Wait()
		c.s.endConversation(conv, "closed session")
	}()
}

// endConversationWait bounds ending a conversation.
const endConversationWait = time.Minute

// endConversation ends conversation conv in the engine and forgets its
// full outputs.
func (s *server) endConversation(conv, why string) {
	s.outputs.forget(conv)
	s.grantsMu.Lock()
	delete(s.grants, conv)
	s.grantsMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), endConversationWait)
	defer cancel()
	if err := s.e.EndConversation(ctx, conv); err != nil && !errors.Is(err, engine.ErrShutdown) {
		s.log.Warn("ending the conversation of a "+why, "conversation", conv, "err", err)
	}
}
