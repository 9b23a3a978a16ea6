package gitserve

import (
	"bytes"
	"container/list"
	"context"
	"crypto/sha256"
	"sync"
	"sync/atomic"
)

// maxViewBytes bounds the memory of the refs views in all (their tips,
// listings and checks), about what 50 repositories of 20,000 refs take.
const maxViewBytes = 64 << 20

// maxSharedAnswer is the largest listing kept for later requests, and
// maxAnswersPerView the most kept per state of a repository's refs (clients
// ask for a few distinct listings; one that asks for many does not push
// the other repositories' views out); an answer not kept is still shared
// by the requests that wait for it.
const (
	maxSharedAnswer   = 8 << 20
	maxAnswersPerView = 32
)

// refsViews keeps, per repository directory, a view of its refs in the
// last state a request found them in (refsView), within maxViewBytes in
// all: the least recently used go first. It is safe for concurrent use.
type refsViews struct {
	reads atomic.Int64 // reads of a repository's refs (readRefs)

	mu    sync.Mutex
	byDir map[string]*refsView
	lru   *list.List // of *refsView, least recently used at the front
	bytes int64
}

func newRefsViews() *refsViews {
	return &refsViews{byDir: map[string]*refsView{}, lru: list.New()}
}

// refsView is what the requests that find a repository's refs in one state
// share: the answers that depend on nothing else (the refs advertisement
// and capabilities, ls-refs listings), the served tips, and which wanted
// objects the refs are known to reach. An answer or a check is made once, by the first request that
// needs it, while identical requests wait for it (flight); one that failed
// is not kept. A request that finds the refs in another state has another
// view: one state is never served for another.
type refsView struct {
	views  *refsViews
	dir    string
	state  []byte            // the snapshot's digest
	config [sha256.Size]byte // the configuration's
	stamp  refsStamp         // of the latest read that found this state; guarded by views.mu
	tips   map[string]bool   // see refsSnapshot.tips
	hexLen int               // of the object ids: 40, or 64 for SHA-256
	unsure string            // see refsSnapshot.unsure

	modelOnce sync.Once
	snap      *refsSnapshot // until the model is made
	model     *refsModel
	modelErr  error

	mu        sync.Mutex
	answers   map[string]*flight[sharedAnswer]
	checks    map[string]*flight[bool] // wants checks in flight, by wantsKey
	reachable map[string]bool          // wants keys whose objects the refs reach
	elem      *list.Element
	size      int64
}

// sharedAnswer is a whole answer of upload-pack, and for a listing the
// object ids it lists.
type sharedAnswer struct {
	body []byte
	tips []string
}

// get returns the view of the refs of dir as they are now: the kept one
// while a stat of the refs finds them as they were read (refsStamp), else
// one from a read of the refs.
func (vs *refsViews) get(dir string) (*refsView, error) {
	vs.mu.Lock()
	v := vs.byDir[dir]
	var stamp refsStamp
	if v != nil {
		stamp = v.stamp
	}
	vs.mu.Unlock()
	if v != nil && stamp.unchanged() {
		vs.touch(v)
		return v, nil
	}
	vs.reads.Add(1)
	snap, err := readRefs(dir)
	if err != nil {
		return nil, err
	}
	vs.mu.Lock()
	if v := vs.byDir[dir]; v != nil && bytes.Equal(v.state, snap.digest) {
		v.stamp = snap.stamp // the refs as they were: a newer stamp, trusted once old enough
		vs.lru.MoveToBack(v.elem)
		vs.mu.Unlock()
		return v, nil
	}
	vs.mu.Unlock()
	tips := snap.tips()
	v = &refsView{views: vs, dir: dir, state: snap.digest, config: snap.config, stamp: snap.stamp, tips: tips, hexLen: snap.hexLen,
		unsure: snap.unsure, snap: &snap,
		answers: map[string]*flight[sharedAnswer]{}, checks: map[string]*flight[bool]{}, reachable: map[string]bool{},
		size: int64(len(tips))*100 + int64(len(snap.packed))}
	vs.mu.Lock()
	defer vs.mu.Unlock()
	if old := vs.byDir[dir]; old != nil {
		if bytes.Equal(old.state, v.state) { // another request made it meanwhile
			vs.lru.MoveToBack(old.elem)
			return old, nil
		}
		if old.config == v.config {
			v.inherit(old)
		}
		vs.drop(old)
	}
	vs.byDir[dir] = v
	v.elem = vs.lru.PushBack(v)
	vs.bytes += v.size
	vs.shrink()
	return v, nil
}

// capabilities names the protocol v2 capability advertisement among a
// view's answers: it depends on the repository's configuration, not on
// its refs.
const capabilities = "info/refs\x00version=2"

// inherit takes over old's capability advertisement, made for the same
// configuration, so that a new state of the refs does not run it again.
func (v *refsView) inherit(old *refsView) {
	old.mu.Lock()
	defer old.mu.Unlock()
	if f := old.answers[capabilities]; f != nil && f.landed() {
		v.answers[capabilities] = f
		v.size += int64(len(f.val.body))
	}
}

// refs returns the model of the view's refs, made by the first request
// that needs it (see refsModel).
func (v *refsView) refs() (*refsModel, error) {
	v.modelOnce.Do(func() {
		v.model, v.modelErr = modelRefs(v.dir, v.snap)
		v.snap = nil
	})
	return v.model, v.modelErr
}

// touch marks v as just used, if it is still kept.
func (vs *refsViews) touch(v *refsView) {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	if v.elem != nil {
		vs.lru.MoveToBack(v.elem)
	}
}

// grow charges n more bytes to v, if it is still kept.
func (vs *refsViews) grow(v *refsView, n int64) {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	if v.elem == nil {
		return
	}
	v.size += n
	vs.bytes += n
	vs.shrink()
}

// shrink drops the least recently used views until the rest fit.
func (vs *refsViews) shrink() {
	for vs.bytes > maxViewBytes && vs.lru.Len() > 1 {
		vs.drop(vs.lru.Front().Value.(*refsView))
	}
}

// drop forgets v; the requests that hold it finish with it.
func (vs *refsViews) drop(v *refsView) {
	vs.lru.Remove(v.elem)
	v.elem = nil
	vs.bytes -= v.size
	if vs.byDir[v.dir] == v {
		delete(vs.byDir, v.dir)
	}
}

// answer returns the answer named key, made by make when no request made
// it (or is making it) yet. keep says whether a made answer may serve
// later requests too.
func (v *refsView) answer(ctx context.Context, key string, make func() (sharedAnswer, bool, error)) (sharedAnswer, error) {
	v.mu.Lock()
	f, leader := join(v.answers, key)
	v.mu.Unlock()
	if !leader {
		return f.wait(ctx)
	}
	a, keep, err := make()
	v.mu.Lock()
	keep = keep && err == nil && len(a.body) <= maxSharedAnswer && len(v.answers) <= maxAnswersPerView
	if !keep {
		delete(v.answers, key)
	}
	v.mu.Unlock()
	f.land(a, err)
	if keep {
		v.views.grow(v, int64(len(a.body)+len(a.tips)*48+len(key)))
	}
	return a, err
}

// flight is one piece of work that concurrent identical asks share: the
// first to ask does it and lands it, the others wait.
type flight[T any] struct {
	done chan struct{}
	val  T
	err  error
}

// join returns the flight of key in m, made when there is none; leader
// says that the caller made it and must land it.
func join[T any](m map[string]*flight[T], key string) (f *flight[T], leader bool) {
	if f := m[key]; f != nil {
		return f, false
	}
	f = &flight[T]{done: make(chan struct{})}
	m[key] = f
	return f, true
}

// landed says whether f landed (a kept answer's flight has).
func (f *flight[T]) landed() bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}

func (f *flight[T]) land(val T, err error) {
	f.val, f.err = val, err
	close(f.done)
}

// wait waits for the flight to land, or for ctx.
func (f *flight[T]) wait(ctx context.Context) (T, error) {
	select {
	case <-f.done:
		return f.val, f.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}
