package gitserve

import (
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
)

// An answer that the requests finding the refs in one state share: the
// refs advertisement of info/refs (protocol v0 and v1) or the capabilities
// (v2), and each distinct ls-refs listing. Plain git runs an upload-pack
// for each; here the first request that needs one writes it from the refs
// (render), or, for a state that they cannot answer exactly, runs the
// upload-pack, and the others get its output.
type answerSpec struct {
	name   string     // the answer's key in the view
	cmd    gitcmd.Cmd // the upload-pack that makes it
	prefix string     // written before it (v0's service line)
	// each filters the answer's pkt-lines (nil: all are passed on).
	each func(pkt []byte) bool
	// lists says that the answer is an ls-refs listing, whose tips are
	// recorded as advertised each time it is served (see recentTips).
	lists bool
	// render, when set, writes the answer without git, from what the
	// served git advertises (capsTemplate) and, when refs is set, the
	// view's refsModel; cmd runs only for a state that they cannot answer.
	render func(t *capsTemplate, m *refsModel) []byte
	refs   bool
}

// serveAnswer answers from the shared answer of spec, made if no request
// made it yet. The answer is whole before its first byte goes out: it goes
// with a Content-Length, and the connection stays open for the client's
// next request.
func (h *Handler) serveAnswer(w http.ResponseWriter, r *http.Request, key string, v *refsView, spec answerSpec) {
	ctx := r.Context()
	a, err := v.answer(ctx, spec.name, func() (sharedAnswer, bool, error) {
		if body, ok := h.render(ctx, key, v, spec); ok {
			a := sharedAnswer{body: body}
			if spec.lists {
				a.tips = listedTips(body)
			}
			return a, true, nil // written from this very state's files
		}
		return h.makeAnswer(ctx, key, v, spec)
	})
	if err != nil {
		h.failed(ctx, w, false, key, err)
		return
	}
	if spec.lists && h.tips != nil {
		// Before the client can have read the listing and asked for a tip.
		h.tips.record(key, a.tips)
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(spec.prefix)+len(a.body)))
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Now().Add(h.idleTimeout()))
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }() // the connection may serve the client's next request
	if _, err := io.WriteString(w, spec.prefix); err == nil {
		_, _ = w.Write(a.body)
	}
}

// makeAnswer runs the upload-pack of spec for every request that waits for
// it: the run goes on if the request that started it leaves. keep is false
// when the refs moved while it ran: its answer then serves the requests
// that waited for it (it is as new as theirs), not later ones.
func (h *Handler) makeAnswer(ctx context.Context, key string, v *refsView, spec answerSpec) (a sharedAnswer, keep bool, err error) {
	ctx = context.WithoutCancel(ctx)
	var buf bytes.Buffer
	cmd := spec.cmd
	cmd.Stdout = &buf
	var pw *pktWriter
	if spec.each != nil {
		pw = &pktWriter{w: &buf, each: spec.each}
		cmd.Stdout = pw
	}
	release, err := h.slots.acquire(ctx, key)
	if err == nil {
		if h.beforeAnswer != nil {
			h.beforeAnswer(key)
		}
		h.shares.answers.Add(1)
		err = h.Git.Run(ctx, cmd)
		release()
	}
	if err == nil && pw != nil {
		err = pw.rest()
	}
	if err != nil {
		h.runFailed(ctx, key, err)
		return sharedAnswer{}, false, err
	}
	a.body = buf.Bytes()
	if spec.lists {
		a.tips = listedTips(a.body)
	}
	after, err := readRefs(v.dir)
	return a, err == nil && bytes.Equal(after.digest, v.state), nil
}

// listedTips returns the object ids of an ls-refs listing's lines
// ("<oid> <refname>[ <attributes>]"), up to maxTipsPerRepo.
func listedTips(body []byte) []string {
	var oids []string
	for len(body) >= 4 && len(oids) < maxTipsPerRepo {
		n, err := strconv.ParseUint(string(body[:4]), 16, 16)
		if err != nil || int(n) > len(body) {
			break
		}
		if n < 4 { // flush, delimiter, response end
			body = body[4:]
			continue
		}
		if oid, _, ok := bytes.Cut(body[4:n], []byte(" ")); ok && gitcmd.IsOID(string(oid)) {
			oids = append(oids, string(oid))
		}
		body = body[n:]
	}
	return oids
}

// render writes the answer of spec from the view's refs without git, if
// it can (see refsModel); ok is false when git must answer.
func (h *Handler) render(ctx context.Context, key string, v *refsView, spec answerSpec) (body []byte, ok bool) {
	if spec.render == nil || v.unsure != "" {
		return nil, false
	}
	t, err := h.capsFor(ctx, v.hexLen)
	if err != nil {
		if h.Log != nil {
			h.Log.Warn("cannot read what git advertises; git answers", "key", key, "err", err)
		}
		return nil, false
	}
	var m *refsModel
	if spec.refs {
		if m, err = v.refs(); err != nil {
			if h.Log != nil && !errors.Is(err, errUnsure) {
				h.Log.Warn("cannot read the refs; git answers", "key", key, "err", err)
			}
			return nil, false
		}
	}
	return spec.render(t, m), true
}

// capsTemplate is what the served git advertises whatever the refs: its
// protocol v2 capability advertisement (as served: servedCapability), the
// capabilities of its v0 refs advertisement, and its v0 answer for a
// repository without refs. It is read once per object format, from git
// itself in a repository made for it (readCaps), so that another git
// version or configuration changes it as it changes git's own answers.
type capsTemplate struct {
	v0     advertisementCaps
	empty  []byte
	v2     []byte
	unborn bool // ls-refs=unborn is advertised: ls-refs lists an unborn HEAD
}

// capsFor returns the capsTemplate of repositories whose object ids have
// hexLen digits, read by the first request that needs it.
func (h *Handler) capsFor(ctx context.Context, hexLen int) (*capsTemplate, error) {
	h.capsMu.Lock()
	if h.caps == nil {
		h.caps = map[string]*flight[*capsTemplate]{}
	}
	f, leader := join(h.caps, strconv.Itoa(hexLen))
	h.capsMu.Unlock()
	if !leader {
		return f.wait(ctx)
	}
	t, err := h.readCaps(context.WithoutCancel(ctx), hexLen)
	if err != nil {
		h.capsMu.Lock()
		delete(h.caps, strconv.Itoa(hexLen)) // the next request tries again
		h.capsMu.Unlock()
	}
	f.land(t, err)
	return t, err
}

// templateBranch is the branch of the repository that readCaps makes.
const templateBranch = "refs/heads/main"

// readCaps runs the upload-pack of every answer in a repository made for
// it: with no refs (the empty answer, and the v2 capabilities), then with
// HEAD on a branch (the v0 capabilities, split where HEAD's symref goes).
// The repository is made in the pack cache's directory, if there is one.
func (h *Handler) readCaps(ctx context.Context, hexLen int) (*capsTemplate, error) {
	parent := "" // the machine's temporary directory, without a cache
	if h.Cache != nil {
		parent = h.Cache.dir // in the data directory
	}
	dir, err := os.MkdirTemp(parent, "caps-*")
	if err != nil {
		return nil, fmt.Errorf("making a repository to read git's capabilities: %w", err)
	}
	defer os.RemoveAll(dir)
	if dir, err = filepath.Abs(dir); err != nil { // git runs elsewhere
		return nil, err
	}
	oid, err := writeTemplateRepo(dir, hexLen)
	if err != nil {
		return nil, fmt.Errorf("making a repository to read git's capabilities: %w", err)
	}
	run := func(env []string, each func([]byte) bool) ([]byte, error) {
		var buf bytes.Buffer
		cmd := h.uploadPack(dir, env)
		cmd.Flags = append(cmd.Flags, "--advertise-refs")
		cmd.Stdout = &buf
		pw := &pktWriter{w: &buf, each: each}
		if each != nil {
			cmd.Stdout = pw
		}
		h.shares.answers.Add(1)
		if err := h.Git.Run(ctx, cmd); err != nil {
			return nil, fmt.Errorf("reading git's capabilities: %w", err)
		}
		if each != nil {
			if err := pw.rest(); err != nil {
				return nil, fmt.Errorf("reading git's capabilities: %w", err)
			}
		}
		return buf.Bytes(), nil
	}
	t := &capsTemplate{}
	if t.empty, err = run(nil, nil); err != nil {
		return nil, err
	}
	if t.v2, err = run([]string{"GIT_PROTOCOL=version=2"}, servedCapability); err != nil {
		return nil, err
	}
	for line := range strings.Lines(string(t.v2)) {
		if len(line) > 4 {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line[4:]), "ls-refs="); ok {
				t.unborn = slices.Contains(strings.Fields(v), "unborn")
			}
		}
	}
	if err := os.WriteFile(filepath.Join(dir, templateBranch), []byte(oid+"\n"), 0o644); err != nil {
		return nil, err
	}
	adv, err := run(nil, nil)
	if err != nil {
		return nil, err
	}
	first, _, _ := strings.Cut(string(adv), "\n")
	_, caps, ok := strings.Cut(first, "\x00")
	before, after, found := strings.Cut(caps, " symref=HEAD:"+templateBranch)
	if !ok || !found || !strings.HasPrefix(first[4:], oid+" HEAD\x00") {
		return nil, fmt.Errorf("git's refs advertisement begins %q, not with HEAD and its capabilities", truncate(first))
	}
	t.v0 = advertisementCaps{before: before, after: after}
	return t, nil
}

// writeTemplateRepo makes a bare repository at dir whose HEAD is on
// templateBranch, which is not written yet, and which holds one object
// (the empty blob, whose id it returns) for the branch to point at.
func writeTemplateRepo(dir string, hexLen int) (string, error) {
	config := "[core]\n\trepositoryformatversion = 0\n\tbare = true\n"
	sum := func(b []byte) []byte { s := sha1.Sum(b); return s[:] }
	if hexLen == 64 {
		config = "[core]\n\trepositoryformatversion = 1\n\tbare = true\n[extensions]\n\tobjectformat = sha256\n"
		sum = func(b []byte) []byte { s := sha256.Sum256(b); return s[:] }
	}
	blob := []byte("blob 0\x00")
	oid := hex.EncodeToString(sum(blob))
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	_, _ = zw.Write(blob)
	_ = zw.Close()
	for _, d := range []string{"refs/heads", "refs/tags", "objects/" + oid[:2]} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return "", err
		}
	}
	files := map[string][]byte{"HEAD": []byte("ref: " + templateBranch + "\n"), "config": []byte(config),
		"objects/" + oid[:2] + "/" + oid[2:]: z.Bytes()}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return "", err
		}
	}
	return oid, nil
}
