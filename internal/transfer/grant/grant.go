// Package grant is the transfer service's capabilities: what a data node
// may do for a job's owner, for one attempt of one task, until a time,
// signed with the controller's key. The controller signs a grant when a
// node claims a task; the destination node's server checks it before it
// takes a push, refuses any path it does not cover, and refuses an older
// attempt of a task than the newest it has seen or been told of (a fence),
// so a node whose lease lapsed while it kept running cannot write.
//
// A grant dies with its task: a signature and an expiry say only that the
// controller once issued it, not that its attempt is still the task's
// current one. So a Verifier with a Confirm hook (a data node's) asks the
// controller at the start of every session whether the grant's attempt is
// current, and lists the attempts its sessions hold (Held) for its
// heartbeat, whose answer fences those that ended. It links nothing but
// the standard library.
package grant

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
)

// Modes a grant gives.
const (
	Write = "write" // push files under Paths
	Read  = "read"  // pull files under Paths
)

// Grant is one capability.
type Grant struct {
	User    string `json:"user"`
	Job     string `json:"job"`
	Task    string `json:"task"`
	Attempt int    `json:"attempt"`
	// Node is the data node whose server takes it.
	Node string `json:"node"`
	Mode string `json:"mode"`
	// Paths are the clean relative paths, under the server's root, it
	// covers, each with everything under it ("." covers the root).
	Paths   []string  `json:"paths"`
	Expires time.Time `json:"expires"`
}

// The reasons a grant is refused. Every one is final for the attempt:
// trying again with the same grant gives the same answer.
var (
	ErrMalformed = errors.New("grant: malformed")
	ErrSignature = errors.New("grant: bad signature")
	ErrExpired   = errors.New("grant: expired")
	ErrWrongNode = errors.New("grant: issued for another node")
	// ErrStale is an attempt older than its task's fence: a newer
	// attempt exists, or the controller said this one is over.
	ErrStale = errors.New("grant: fenced")
	// ErrOver is the controller's word (Confirm) that the attempt is no
	// longer its task's current one: the task ended, failed, was
	// cancelled or re-attempted.
	ErrOver  = errors.New("grant: its task's attempt is over")
	ErrNoKey = errors.New("grant: this server has no controller key yet")
	ErrPath  = errors.New("grant: path not covered")
	ErrMode  = errors.New("grant: mode not granted")
)

// NewKey makes a new signing key.
func NewKey() (ed25519.PrivateKey, error) {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	return k, err
}

// EncodeKey and DecodeKey spell a public key as base64.
func EncodeKey(k ed25519.PublicKey) string { return base64.StdEncoding.EncodeToString(k) }

// DecodeKey reads a public key spelled by EncodeKey.
func DecodeKey(s string) (ed25519.PublicKey, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%w: not an ed25519 public key", ErrMalformed)
	}
	return ed25519.PublicKey(b), nil
}

// Sign returns the grant as a token: base64url(JSON) "." base64url(sig).
func Sign(key ed25519.PrivateKey, g Grant) (string, error) {
	if err := g.check(); err != nil {
		return "", err
	}
	body, err := json.Marshal(g)
	if err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding
	return enc.EncodeToString(body) + "." + enc.EncodeToString(ed25519.Sign(key, body)), nil
}

// MaxToken bounds the length of a token a server reads.
const MaxToken = 16 << 10

// Parse checks a token's signature with key and returns its grant; it
// does not look at the time, the node or fences (Verifier does).
func Parse(key ed25519.PublicKey, token string) (Grant, error) {
	if len(token) > MaxToken {
		return Grant{}, fmt.Errorf("%w: %d bytes, at most %d", ErrMalformed, len(token), MaxToken)
	}
	b64, s64, ok := strings.Cut(token, ".")
	if !ok {
		return Grant{}, fmt.Errorf("%w: no signature", ErrMalformed)
	}
	enc := base64.RawURLEncoding
	body, err1 := enc.DecodeString(b64)
	sig, err2 := enc.DecodeString(s64)
	if err1 != nil || err2 != nil {
		return Grant{}, fmt.Errorf("%w: not base64url", ErrMalformed)
	}
	if len(key) != ed25519.PublicKeySize || !ed25519.Verify(key, body, sig) {
		return Grant{}, ErrSignature
	}
	var g Grant
	if err := json.Unmarshal(body, &g); err != nil {
		return Grant{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if err := g.check(); err != nil {
		return Grant{}, err
	}
	return g, nil
}

func (g Grant) check() error {
	switch {
	case g.Task == "" || g.Node == "" || g.User == "":
		return fmt.Errorf("%w: user, task and node are required", ErrMalformed)
	case g.Attempt < 1:
		return fmt.Errorf("%w: attempt %d", ErrMalformed, g.Attempt)
	case g.Mode != Write && g.Mode != Read:
		return fmt.Errorf("%w: mode %q", ErrMalformed, g.Mode)
	case len(g.Paths) == 0:
		return fmt.Errorf("%w: no paths", ErrMalformed)
	case g.Expires.IsZero():
		return fmt.Errorf("%w: no expiry", ErrMalformed)
	}
	for _, p := range g.Paths {
		if !clean(p) {
			return fmt.Errorf("%w: path %q is not clean and relative", ErrMalformed, p)
		}
	}
	return nil
}

// clean reports whether p is a clean relative path that stays under its
// root.
func clean(p string) bool {
	return p != "" && !strings.HasPrefix(p, "/") && path.Clean(p) == p && p != ".." && !strings.HasPrefix(p, "../")
}

// Covers reports whether the grant allows mode on p, a path under the
// server's root (leading slashes are ignored, as the mover's paths are).
func (g Grant) Covers(mode, p string) error {
	if mode != g.Mode {
		return fmt.Errorf("%w: %s, the grant gives %s", ErrMode, mode, g.Mode)
	}
	q := strings.TrimLeft(p, "/")
	if q == "" {
		q = "."
	}
	if !clean(q) {
		return fmt.Errorf("%w: %q", ErrPath, p)
	}
	for _, c := range g.Paths {
		if c == "." || q == c || strings.HasPrefix(q, c+"/") {
			return nil
		}
	}
	return fmt.Errorf("%w: %q is outside %s", ErrPath, p, strings.Join(g.Paths, ", "))
}

// Leads reports whether p, a path under the server's root, is a directory
// on the way to a path the grant covers (a proper ancestor of one): a
// server may create it to reach what it covers, and nothing more.
func (g Grant) Leads(p string) bool {
	q := strings.TrimLeft(p, "/")
	if q == "" {
		q = "."
	}
	if !clean(q) {
		return false
	}
	for _, c := range g.Paths {
		if c != q && (q == "." && c != "." || strings.HasPrefix(c, q+"/")) {
			return true
		}
	}
	return false
}

// Verifier checks grants on a node's server: the controller's key, the
// node's name, and the fences it has seen or been told of. Safe for
// concurrent use.
type Verifier struct {
	node string
	now  func() time.Time

	mu     sync.Mutex
	key    ed25519.PublicKey
	fences map[string]fence
	// life is the longest lifetime left on a grant this verifier has
	// taken: a fence told by the controller is kept at least that long,
	// since an older attempt's grant may live as long.
	life time.Duration
	// changed is closed, and replaced, whenever a fence rises.
	changed chan struct{}
	// confirm asks the controller whether an attempt is current (nil: no
	// one to ask; see SetConfirm).
	confirm func(ctx context.Context, task string, attempt int) error
	// held counts the sessions running under each attempt (Hold).
	held map[Held]int
	// receipt is the node's receipt secret (SetReceiptKey).
	receipt []byte
	// broken are the attempts whose sessions ended broken since the last
	// TakeBroken (Broke), and broke is signalled at each.
	broken map[Held]bool
	broke  chan struct{}
}

// Held is an attempt of a task under which sessions run on this server.
type Held struct {
	Task    string
	Attempt int
}

type fence struct {
	attempt int
	until   time.Time // forgotten after this: no grant of an attempt up to it can be valid then
}

// NewVerifier checks grants for node; now is the clock (time.Now when nil).
func NewVerifier(node string, now func() time.Time) *Verifier {
	if now == nil {
		now = time.Now
	}
	return &Verifier{node: node, now: now, fences: map[string]fence{}, changed: make(chan struct{}), held: map[Held]int{},
		broken: map[Held]bool{}, broke: make(chan struct{}, 1)}
}

// SetConfirm sets how the verifier asks the controller whether an attempt
// of a task is still current: fn returns nil when it is, an error that
// matches ErrOver when it is not (the task ended, failed, was cancelled
// or re-attempted), and any other error when it could not ask. A data
// node sets it before its server takes a session.
func (v *Verifier) SetConfirm(fn func(ctx context.Context, task string, attempt int) error) {
	v.mu.Lock()
	v.confirm = fn
	v.mu.Unlock()
}

// Confirm asks the controller whether g's attempt is still its task's
// current one, after Verify and before a session starts under g: the
// signature and the expiry cannot say that a task has ended since the
// grant was signed, and the fences a restarted server was told are gone.
// An attempt that is over is fenced here (so every later session under it
// is refused without asking, and running ones are cut) and refused with an
// error matching ErrOver; a controller that cannot be asked gives its
// error, which the server answers as busy (worth a retry). Without a
// Confirm hook it accepts (a server outside the transfer service's data
// nodes, e.g. in tests of the mover).
func (v *Verifier) Confirm(ctx context.Context, g Grant) error {
	v.mu.Lock()
	fn := v.confirm
	v.mu.Unlock()
	if fn == nil {
		return nil
	}
	err := fn(ctx, g.Task, g.Attempt)
	if errors.Is(err, ErrOver) || errors.Is(err, ErrStale) {
		v.Fence(g.Task, g.Attempt+1)
	}
	return err
}

// Hold records that a session runs under attempt of task, until the
// returned func is called (once): Held lists it meanwhile.
func (v *Verifier) Hold(task string, attempt int) (release func()) {
	h := Held{Task: task, Attempt: attempt}
	v.mu.Lock()
	v.held[h]++
	v.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			v.mu.Lock()
			if v.held[h]--; v.held[h] <= 0 {
				delete(v.held, h)
			}
			v.mu.Unlock()
		})
	}
}

// maxBroken bounds the broken attempts kept between two TakeBroken.
const maxBroken = 1024

// Broke records that a session under attempt of task ended broken: its
// peer went away or failed mid-session (not a clean end, not cut by a
// fence, not this server stopping). The data node's heartbeat names it
// at once (Broken, TakeBroken), for the controller to suspect the
// pushing node of being dead rather than wait for its lease to lapse.
func (v *Verifier) Broke(task string, attempt int) {
	v.mu.Lock()
	if len(v.broken) < maxBroken {
		v.broken[Held{Task: task, Attempt: attempt}] = true
	}
	v.mu.Unlock()
	select {
	case v.broke <- struct{}{}:
	default:
	}
}

// Broken is signalled after each Broke (coalesced): the heartbeat loop
// sends one at once.
func (v *Verifier) Broken() <-chan struct{} { return v.broke }

// TakeBroken returns the attempts recorded by Broke since the last call,
// by task then attempt, and forgets them; an attempt under which a
// session runs again (its pushing node came back) is left out: its node
// lives.
func (v *Verifier) TakeBroken() []Held {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]Held, 0, len(v.broken))
	for h := range v.broken {
		if v.held[h] == 0 {
			out = append(out, h)
		}
	}
	clear(v.broken)
	sortHeld(out)
	return out
}

func sortHeld(hs []Held) {
	slices.SortFunc(hs, func(a, b Held) int {
		if c := strings.Compare(a.Task, b.Task); c != 0 {
			return c
		}
		return a.Attempt - b.Attempt
	})
}

// Held lists the attempts under which sessions run now, by task then
// attempt: a data node's heartbeat names them, and the controller answers
// with a fence for each that is no longer current, which cuts them.
func (v *Verifier) Held() []Held {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]Held, 0, len(v.held))
	for h := range v.held {
		out = append(out, h)
	}
	sortHeld(out)
	return out
}

// Changed returns a channel closed at the next rise of any fence: a server
// waits on it, then asks Current of each session it runs, so a fenced
// session ends at once without polling.
func (v *Verifier) Changed() <-chan struct{} {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.changed
}

// SetKey sets the controller's public key (from its heartbeat answers).
func (v *Verifier) SetKey(k ed25519.PublicKey) {
	v.mu.Lock()
	v.key = k
	v.mu.Unlock()
}

// fenceTTL is how long a fence told by the controller is kept at least
// (longer when a grant taken here lived longer).
const fenceTTL = time.Hour

// Fence raises task's fence to attempt: older attempts are refused from
// now on, and sessions running one of them are told (Changed).
func (v *Verifier) Fence(task string, attempt int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.raise(task, attempt, v.now().Add(max(fenceTTL, v.life)))
}

func (v *Verifier) raise(task string, attempt int, until time.Time) {
	f := v.fences[task]
	if attempt > f.attempt {
		f.attempt = attempt
		close(v.changed)
		v.changed = make(chan struct{})
	}
	if until.After(f.until) {
		f.until = until
	}
	v.fences[task] = f
	if len(v.fences) > 1024 {
		now := v.now()
		for t, f := range v.fences {
			if now.After(f.until) {
				delete(v.fences, t)
			}
		}
	}
}

// Verify checks a token: signature, expiry, node and fence. A valid grant
// raises its task's fence to its attempt, so every older attempt is
// refused from then on.
func (v *Verifier) Verify(token string) (Grant, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.key == nil {
		return Grant{}, ErrNoKey
	}
	g, err := Parse(v.key, token)
	if err != nil {
		return Grant{}, err
	}
	now := v.now()
	switch {
	case !now.Before(g.Expires):
		return Grant{}, fmt.Errorf("%w at %s", ErrExpired, g.Expires.UTC().Format(time.RFC3339))
	case g.Node != v.node:
		return Grant{}, fmt.Errorf("%w: %s, this is %s", ErrWrongNode, g.Node, v.node)
	case g.Attempt < v.fences[g.Task].attempt:
		return Grant{}, fmt.Errorf("%w: attempt %d of task %s is no longer current (the fence is at attempt %d)", ErrStale, g.Attempt, g.Task, v.fences[g.Task].attempt)
	}
	v.life = max(v.life, g.Expires.Sub(now))
	// The fence outlives the grant by the longest lifetime seen, for the
	// same reason as in Fence: an older attempt's grant may expire later.
	v.raise(g.Task, g.Attempt, g.Expires.Add(v.life))
	return g, nil
}

// Current reports whether attempt is still the newest of task: a server
// checks it while a session runs, and ends the session when not.
func (v *Verifier) Current(task string, attempt int) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return attempt >= v.fences[task].attempt
}
