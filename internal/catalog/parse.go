package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/gitfleet/gitfleet/internal/egress"
	"github.com/gitfleet/gitfleet/internal/network"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"go.yaml.in/yaml/v3"
)

// fileKind says what a catalog path is, from its name alone.
type fileKind uint8

const (
	kindNone     fileKind = iota // README*, hidden: never read
	kindList                     // *.list: one URL per line
	kindDefaults                 // DEFAULTS: attributes for the entries below
	kindYAML                     // anything else: a YAML entry if it is one
)

// maxFileSize bounds what is parsed of one file; a larger file is reported.
const maxFileSize = 64 << 20

func classify(p string) fileKind {
	for _, part := range strings.Split(p, "/") {
		if strings.HasPrefix(part, ".") {
			return kindNone
		}
	}
	base := path.Base(p)
	switch {
	case base == "DEFAULTS":
		return kindDefaults
	case strings.HasSuffix(base, ".list"):
		return kindList
	case strings.HasPrefix(strings.ToUpper(base), "README"):
		return kindNone
	}
	return kindYAML
}

// dirOf is the directory of a catalog path ("" for the root).
func dirOf(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return ""
	}
	return p[:i]
}

var utf8BOM = []byte("\xef\xbb\xbf")

func (f *fileData) problem(line int, severity, key, reason string) {
	f.problems = append(f.problems, Problem{File: f.name.path, Line: line, Key: key, Reason: repokey.Redact(reason), Severity: severity})
}

// urlProblem records err, an entry's URL that repokey.Normalize refused,
// marked Refused when the egress policy is what refused it.
func (f *fileData) urlProblem(line int, key, prefix string, err error) {
	f.problem(line, SeverityError, key, prefix+err.Error())
	f.problems[len(f.problems)-1].Refused = egress.IsBlocked(err)
}

// parseEntries fills f from the content of an entry file (.list or YAML).
// sc is reused from file to file by one goroutine.
func parseEntries(f *fileData, kind fileKind, data []byte, opt repokey.Options, sc *scratch) {
	if kind == kindList {
		parseListWith(f, data, opt, sc)
	} else {
		parseYAML(f, data, opt)
	}
}

// scratch is the working memory of parseList, kept from one file to the
// next: at a million entries, making it for each file doubles the garbage
// of a load.
type scratch struct {
	keys repokey.Batch
}

// parseList reads a .list file: one URL per line; "#" at the start of a
// line or after a blank starts a comment; blank lines, CRLF and a missing
// final newline are fine. The keys of the file share one string.
func parseList(f *fileData, data []byte, opt repokey.Options) {
	parseListWith(f, data, opt, &scratch{})
}

func parseListWith(f *fileData, data []byte, opt repokey.Options, sc *scratch) {
	data = bytes.TrimPrefix(data, utf8BOM)
	most := bytes.Count(data, []byte{'\n'}) + 1
	slab, lines := make([]entry, 0, most), make([]int32, 0, most)
	for line := 1; len(data) > 0; line++ {
		l, rest, _ := bytes.Cut(data, []byte{'\n'})
		data = rest
		l = bytes.TrimSpace(stripComment(l))
		if len(l) == 0 {
			continue
		}
		e := entry{name: f.name}
		if n, ok := sc.keys.AddFast(l); ok {
			switch trimmed := len(l) - len("https://") - n; {
			case trimmed == 0:
				e.form = formHTTPS
			case trimmed == len(".git") && bytes.HasSuffix(l, []byte(".git")):
				e.form = formHTTPSGit
			default: // trailing slashes
				e.extra = &extra{url: string(l)}
			}
		} else if isLister(l) {
			listerLine(f, line, string(l), opt)
			continue
		} else {
			key, fetch, err := repokey.Normalize(string(l), opt)
			if err != nil {
				f.urlProblem(line, "", "", err)
				continue
			}
			if e.form = formOf(key, fetch); e.form == formExtra {
				e.extra = &extra{url: fetch}
			}
			sc.keys.Add(key)
		}
		slab = append(slab, e)
		lines = append(lines, int32(line))
	}
	if cap(slab) > len(slab)+len(slab)/8 { // many comments or bad lines
		slab, lines = slices.Clone(slab), slices.Clone(lines)
	}
	sc.keys.Keys(func(i int, k repokey.Key) { slab[i].key = k })
	f.setEntries(slab, lines)
}

// stripComment cuts l at a "#" that starts it or follows a blank (a "#"
// inside a URL is left for the URL check to refuse).
func stripComment(l []byte) []byte {
	for i := 0; ; i++ {
		j := bytes.IndexByte(l[i:], '#')
		if j < 0 {
			return l
		}
		i += j
		if i == 0 || l[i-1] == ' ' || l[i-1] == '\t' {
			return l[:i]
		}
	}
}

func formOf(k repokey.Key, fetch string) urlForm {
	key := k.String()
	const scheme = "https://"
	switch {
	case len(fetch) == len(scheme)+len(key) && strings.HasPrefix(fetch, scheme) && fetch[len(scheme):] == key:
		return formHTTPS
	case len(fetch) == len(scheme)+len(key)+4 && strings.HasPrefix(fetch, scheme) &&
		strings.HasSuffix(fetch, ".git") && fetch[len(scheme):len(fetch)-4] == key:
		return formHTTPSGit
	}
	return formExtra
}

// firstDocument decodes data and returns the root node of its first
// non-empty YAML document (nil if none). A syntax error or a second
// non-empty document is reported on f; after a syntax error it returns nil,
// so that a malformed file contributes nothing.
func firstDocument(f *fileData, data []byte) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root *yaml.Node
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return root
		}
		if err != nil {
			line, msg := yamlError(err)
			f.problem(line, SeverityError, "", "not valid YAML, file skipped: "+msg)
			return nil
		}
		if len(doc.Content) == 0 || doc.Content[0].Kind == yaml.ScalarNode && doc.Content[0].ShortTag() == "!!null" {
			continue // an empty document, e.g. a lone "---"
		}
		if root == nil {
			root = doc.Content[0]
			continue
		}
		f.problem(doc.Content[0].Line, SeverityError, "",
			"a second YAML document: a file holds one entry, only the first document is read")
		return root
	}
}

// yamlError splits a yaml.v3 error ("yaml: line 3: did not find...") into
// its line (1 when it has none) and message.
func yamlError(err error) (int, string) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	rest, ok := strings.CutPrefix(msg, "line ")
	if !ok {
		return 1, msg
	}
	digits, text, _ := strings.Cut(rest, ": ")
	n, convErr := strconv.Atoi(digits)
	if convErr != nil || n < 1 {
		return 1, msg
	}
	return n, text
}

// parseYAML reads a YAML entry file: a mapping whose "url" is a string or
// a list (the first is the upstream, the rest fallbacks) and whose other
// keys are attributes. A file that never mentions "url", or whose document
// is not a mapping, is not an entry file and is ignored without a problem.
func parseYAML(f *fileData, data []byte, opt repokey.Options) {
	urls, ok := simpleEntry(data)
	var attrs map[string]string
	if !ok {
		if urls, attrs, ok = yamlEntry(f, data); !ok {
			return
		}
	}
	addEntry(f, urls, attrs, opt)
}

// yamlURL is one URL of a YAML entry, with its line.
type yamlURL struct {
	value string
	line  int
}

// yamlEntry reads the URLs and attributes of a YAML entry file with the
// YAML parser. ok is false when the file is not an entry, or a bad one
// (reported on f).
func yamlEntry(f *fileData, data []byte) (urls []yamlURL, attrs map[string]string, ok bool) {
	if !bytes.Contains(data, []byte("url")) {
		return nil, nil, false
	}
	root := firstDocument(f, data)
	if root == nil || root.Kind != yaml.MappingNode {
		return nil, nil, false
	}
	var urlNode *yaml.Node
	attrs = yamlAttrs(f, root, func(k, v *yaml.Node) bool {
		if k.Value != "url" {
			return false
		}
		urlNode = v
		return true
	})
	if urlNode == nil {
		f.problem(root.Line, SeverityWarning, "", "a YAML mapping without a url: key is not an entry; ignored")
		return nil, nil, false
	}
	nodes := []*yaml.Node{urlNode}
	if urlNode.Kind == yaml.SequenceNode {
		nodes = urlNode.Content
	}
	if len(nodes) == 0 {
		f.problem(urlNode.Line, SeverityError, "", "url: is an empty list")
		return nil, nil, false
	}
	for _, n := range nodes {
		u := resolveAlias(n)
		if u.Kind != yaml.ScalarNode || u.ShortTag() == "!!null" {
			f.problem(n.Line, SeverityError, "", "url: want a URL or a list of URLs")
			return nil, nil, false
		}
		urls = append(urls, yamlURL{u.Value, u.Line})
	}
	return urls, attrs, true
}

// simpleEntry reads, without the YAML parser (which costs some 40 times
// more), the form that nearly every Compass-CI entry file has:
//
//	---
//	url:
//	- https://host/path.git
//
// with the "---" optional, one or more "- " lines (or "url: URL" on one
// line) and only blank lines after them. It accepts only what the YAML
// parser reads the same way: URLs that start with a letter and hold a
// ":" but do not end with one (so that YAML cannot read them as a number,
// a bool, null or a mapping), made of characters that mean nothing inside
// a plain scalar. For anything else it returns false, and the YAML parser
// decides. FuzzSimpleEntry holds it to that.
func simpleEntry(data []byte) ([]yamlURL, bool) {
	var urls []yamlURL
	inList, done := false, false
	for line := 1; len(data) > 0; line++ {
		l, rest, _ := bytes.Cut(data, []byte{'\n'})
		data = rest
		l = bytes.TrimSuffix(l, []byte{'\r'})
		switch {
		case len(l) == 0 && len(urls) > 0:
			done = true
		case done:
			return nil, false
		case line == 1 && string(l) == "---":
		case !inList && len(urls) == 0 && string(l) == "url:":
			inList = true
		case !inList && len(urls) == 0 && bytes.HasPrefix(l, []byte("url: ")) && plainURL(l[len("url: "):]):
			urls = append(urls, yamlURL{string(l[len("url: "):]), line})
			done = true
		case inList && bytes.HasPrefix(l, []byte("- ")) && plainURL(l[len("- "):]):
			urls = append(urls, yamlURL{string(l[len("- "):]), line})
		default:
			return nil, false
		}
	}
	return urls, len(urls) > 0
}

// plainURL says whether YAML reads s, in a plain scalar, as the string s.
func plainURL(s []byte) bool {
	if len(s) == 0 || !(s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z') ||
		s[len(s)-1] == ':' || !bytes.Contains(s, []byte{':'}) {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') && strings.IndexByte("._-~/:@+%=", c) < 0 {
			return false
		}
	}
	return true
}

// addEntry adds to f the entry of a YAML file with urls and attrs.
func addEntry(f *fileData, urls []yamlURL, attrs map[string]string, opt repokey.Options) {
	if isLister([]byte(urls[0].value)) {
		if len(urls) > 1 {
			f.problem(urls[1].line, SeverityWarning, "", "a lister has no fallback URLs; ignored")
		}
		addLister(f, urls[0].line, urls[0].value, mergeAttrs(f.attrs, attrs), opt)
		return
	}
	key, fetch, err := repokey.Normalize(urls[0].value, opt)
	if err != nil {
		f.urlProblem(urls[0].line, "", "", err)
		return
	}
	e := entry{key: key, name: f.name, form: formOf(key, fetch)}
	var fallbacks []string
	for _, u := range urls[1:] {
		_, fb, err := repokey.Normalize(u.value, opt)
		if err != nil {
			f.urlProblem(u.line, key.String(), "fallback URL skipped: ", err)
			continue
		}
		fallbacks = append(fallbacks, fb)
	}
	if e.form == formExtra || len(fallbacks) > 0 || len(attrs) > 0 {
		e.extra = &extra{fallbacks: fallbacks}
		if e.form == formExtra {
			e.extra.url = fetch
		}
		if len(attrs) > 0 {
			e.extra.attrs = mergeAttrs(f.attrs, attrs)
		}
	}
	f.setEntries([]entry{e}, []int32{int32(urls[0].line)})
}

// parseDefaults reads a DEFAULTS file: a mapping of attributes for every
// entry below its directory. A url key there is ignored with a warning.
func parseDefaults(f *fileData, data []byte) map[string]string {
	root := firstDocument(f, data)
	if root == nil {
		return nil
	}
	if root.Kind != yaml.MappingNode {
		f.problem(root.Line, SeverityError, "", "DEFAULTS must be a YAML mapping; ignored")
		return nil
	}
	return yamlAttrs(f, root, func(k, _ *yaml.Node) bool {
		if k.Value != "url" {
			return false
		}
		f.problem(k.Line, SeverityWarning, "", "url: in DEFAULTS is ignored (every entry names its own)")
		return true
	})
}

// yamlAttrs renders the keys of a mapping as attributes, except those that
// special takes. A repeated or non-string key is reported.
func yamlAttrs(f *fileData, m *yaml.Node, special func(k, v *yaml.Node) bool) map[string]string {
	var attrs map[string]string
	seen := make(map[string]bool)
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], resolveAlias(m.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			f.problem(k.Line, SeverityError, "", "a key that is not a string; ignored")
			continue
		}
		if seen[k.Value] {
			f.problem(k.Line, SeverityError, "", fmt.Sprintf("key %q is repeated; the first is used", k.Value))
			continue
		}
		seen[k.Value] = true
		if special(k, v) {
			continue
		}
		s, err := renderAttr(v)
		if err == nil && k.Value == AttrNetwork {
			err = network.CheckName(s)
		}
		if err != nil {
			f.problem(v.Line, SeverityError, "", fmt.Sprintf("attribute %q skipped: %v", k.Value, err))
			continue
		}
		if attrs == nil {
			attrs = make(map[string]string)
		}
		attrs[k.Value] = s
	}
	return attrs
}

func resolveAlias(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 8; i++ {
		n = n.Alias
	}
	return n
}

// mergeAttrs returns inner merged over outer (outer is not modified).
func mergeAttrs(outer, inner map[string]string) map[string]string {
	if len(inner) == 0 {
		return outer
	}
	if len(outer) == 0 {
		return inner
	}
	out := maps.Clone(outer)
	maps.Copy(out, inner)
	return out
}

// Bounds of a rendered attribute; aliases can make a small file render to a
// huge value, so rendering stops at these.
const (
	maxAttrLen   = 64 << 10
	maxAttrDepth = 32
)

var errAttrTooBig = fmt.Errorf("value larger than %d bytes or deeper than %d levels", maxAttrLen, maxAttrDepth)

// renderAttr renders an attribute value: a scalar as its text (null as
// ""), a list or a map as compact JSON in source order.
func renderAttr(n *yaml.Node) (string, error) {
	if n.Kind == yaml.ScalarNode {
		if n.ShortTag() == "!!null" {
			return "", nil
		}
		return n.Value, nil
	}
	var buf []byte
	if err := appendJSON(&buf, n, 0); err != nil {
		return "", err
	}
	return string(buf), nil
}

func appendJSON(buf *[]byte, n *yaml.Node, depth int) error {
	if depth > maxAttrDepth || len(*buf) > maxAttrLen {
		return errAttrTooBig
	}
	switch n.Kind {
	case yaml.AliasNode:
		if n.Alias == nil {
			*buf = append(*buf, "null"...)
			return nil
		}
		return appendJSON(buf, n.Alias, depth+1)
	case yaml.SequenceNode, yaml.MappingNode:
		open, close, step := byte('['), byte(']'), 1
		if n.Kind == yaml.MappingNode {
			open, close, step = '{', '}', 2
		}
		*buf = append(*buf, open)
		for i := 0; i+step-1 < len(n.Content); i += step {
			if i > 0 {
				*buf = append(*buf, ',')
			}
			if step == 2 {
				k := resolveAlias(n.Content[i])
				if k.Kind != yaml.ScalarNode {
					return errors.New("a map key that is not a string")
				}
				*buf = appendJSONString(*buf, k.Value)
				*buf = append(*buf, ':')
			}
			if err := appendJSON(buf, n.Content[i+step-1], depth+1); err != nil {
				return err
			}
		}
		*buf = append(*buf, close)
		return nil
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			*buf = append(*buf, "null"...)
			return nil
		case "!!bool", "!!int", "!!float":
			var v any
			if n.Decode(&v) == nil {
				if b, err := json.Marshal(v); err == nil {
					*buf = append(*buf, b...)
					return nil
				}
			}
		}
		*buf = appendJSONString(*buf, n.Value)
		return nil
	}
	return fmt.Errorf("unsupported YAML node kind %d", n.Kind)
}

func appendJSONString(buf []byte, s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return append(buf, bytes.TrimSuffix(b.Bytes(), []byte{'\n'})...)
}

// defaultsAbove returns, for every directory with a DEFAULTS, its
// attributes merged over those of the DEFAULTS above it (inner over outer).
func defaultsAbove(own map[string]map[string]string) map[string]map[string]string {
	merged := make(map[string]map[string]string, len(own))
	var get func(dir string) map[string]string
	get = func(dir string) map[string]string {
		if m, ok := merged[dir]; ok {
			return m
		}
		var outer map[string]string
		for d := dir; d != ""; {
			d = dirOf(d)
			if _, ok := own[d]; ok {
				outer = get(d)
				break
			}
		}
		m := mergeAttrs(outer, own[dir])
		merged[dir] = m
		return m
	}
	for dir := range own {
		get(dir)
	}
	return merged
}

// attrsFor returns the merged DEFAULTS that apply to files in dir.
func attrsFor(merged map[string]map[string]string, dir string) map[string]string {
	for {
		if m, ok := merged[dir]; ok {
			return m
		}
		if dir == "" {
			return nil
		}
		dir = dirOf(dir)
	}
}
