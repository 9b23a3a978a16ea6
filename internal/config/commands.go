package config

import (
	"fmt"
	"slices"
	"strings"
)

// Role is a part a gitfleet process plays. Every setting names the roles it
// applies to (its `roles` tag), and a command takes the settings of its
// roles only.
type Role string

// The roles.
const (
	RoleCoordinator Role = "coordinator"
	RolePartial     Role = "partial" // gitfleet node --mode partial
	RoleFull        Role = "full"    // gitfleet node --mode full
	RoleUp          Role = "up"      // a coordinator and a full node in one process
	RoleDemo        Role = "demo"
)

var allRoles = []Role{RoleCoordinator, RolePartial, RoleFull, RoleUp, RoleDemo}

// Command is a command that takes settings: its name as typed after
// gitfleet (for messages and help) and the roles whose settings it takes.
type Command struct {
	Name  string
	Roles []Role
}

// The commands that take settings. gitfleet doctor takes those of the role
// it checks (see ForDoctor).
var (
	CoordinatorCommand = Command{Name: "coordinator", Roles: []Role{RoleCoordinator}}
	NodeCommand        = Command{Name: "node", Roles: []Role{RolePartial, RoleFull}}
	UpCommand          = Command{Name: "up", Roles: []Role{RoleUp}}
	DemoCommand        = Command{Name: "demo", Roles: []Role{RoleDemo}}
)

// Commands lists the commands that take settings.
func Commands() []Command {
	return []Command{CoordinatorCommand, NodeCommand, UpCommand, DemoCommand}
}

// takes tells whether the command takes a setting that applies to roles.
func (c Command) takes(roles []Role) bool {
	for _, r := range roles {
		if slices.Contains(c.Roles, r) {
			return true
		}
	}
	return false
}

// topics are the groups of a command's help, in their order, by the
// `topic` tag of the settings.
var topics = []struct{ id, title string }{
	{"fleet", "Fleet: coordinator, tokens, membership"},
	{"volunteer", "A volunteer's machine: bandwidth, hours, status"},
	{"catalog", "Catalog"},
	{"serve", "Serving git, the API and the console"},
	{"api", "API and webhooks"},
	{"freshness", "Checks and fetches"},
	{"feeds", "Forge feeds"},
	{"limits", "Limits on what an upstream may cost"},
	{"egress", "Egress: where upstreams and webhooks may reach"},
	{"storage", "Data, verification and maintenance"},
	{"trust", "Trust in volunteers"},
	{"tls", "TLS"},
	{"ha", "High availability (etcd)"},
	{"alerts", "Alerts"},
	{"process", "Process: configuration, logs, metrics, profiles, memory"},
}

func knownTopic(id string) bool {
	return slices.ContainsFunc(topics, func(t struct{ id, title string }) bool { return t.id == id })
}

func parseRoles(tag string) []Role {
	var out []Role
	for _, r := range strings.Split(tag, ",") {
		if r = strings.TrimSpace(r); r != "" {
			out = append(out, Role(r))
		}
	}
	return out
}

// fieldsOf returns the settings that cmd takes, in the struct's order.
func fieldsOf(cmd Command) []Field {
	var out []Field
	for _, f := range Fields() {
		if cmd.takes(f.Roles) {
			out = append(out, f)
		}
	}
	return out
}

// commandsOf names the commands that take a setting of roles, for people:
// "coordinator, node (full) and up".
func commandsOf(roles []Role) string {
	var names []string
	for _, c := range Commands() {
		if !c.takes(roles) {
			continue
		}
		name := c.Name
		if m := modeOnly(roles); c.Name == NodeCommand.Name && m != "" {
			name += " (" + m + ")"
		}
		names = append(names, name)
	}
	switch len(names) {
	case 0:
		return "no command"
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// modeOnly is "full" or "partial" for a setting of one node mode only, ""
// for one of both or neither.
func modeOnly(roles []Role) string {
	partial, full := slices.Contains(roles, RolePartial), slices.Contains(roles, RoleFull)
	switch {
	case partial && !full:
		return string(RolePartial)
	case full && !partial:
		return string(RoleFull)
	}
	return ""
}

// Help renders the flags that cmd takes, for `gitfleet <command> -h`:
// first the essential ones, then the others grouped by topic.
func Help(cmd Command) string {
	var b strings.Builder
	fields := fieldsOf(cmd)
	essential := func(f Field) bool { return cmd.takes(f.Essential) }
	var first []Field
	for _, f := range fields {
		if essential(f) {
			first = append(first, f)
		}
	}
	if len(first) > 0 {
		b.WriteString("Essential flags:\n")
		for _, f := range first {
			writeFlag(&b, cmd, f)
		}
	}
	for _, t := range topics {
		var group []Field
		for _, f := range fields {
			if f.Topic == t.id && !essential(f) {
				group = append(group, f)
			}
		}
		if t.id == "process" {
			group = append([]Field{{Name: "config", Type: "string", Help: "YAML configuration file: each key is a flag's name (flags override it)"}}, group...)
		}
		if len(group) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n%s:\n", t.title)
		for _, f := range group {
			writeFlag(&b, cmd, f)
		}
	}
	return b.String()
}

// helpWidth is where help text is wrapped.
const helpWidth = 80

func writeFlag(b *strings.Builder, cmd Command, f Field) {
	head := "  --" + f.Name
	if f.Type != "bool" {
		head += " " + f.Type
	}
	if f.Default != "" && f.Default != "false" && f.Default != "0" && f.Default != "0s" {
		head += " (default " + f.Default + ")"
	}
	b.WriteString(head + "\n")
	help := f.Help
	bothModes := cmd.takes([]Role{RolePartial}) && cmd.takes([]Role{RoleFull}) // node, doctor full and partial
	if m := modeOnly(f.Roles); bothModes && m != "" {
		help += " [--mode " + m + " only]"
	}
	wrap(b, help, "        ")
}

// wrap writes text in lines of at most helpWidth columns, each starting
// with indent.
func wrap(b *strings.Builder, text, indent string) {
	line := indent
	for _, w := range strings.Fields(text) {
		if len(line) > len(indent) && len(line)+1+len(w) > helpWidth {
			b.WriteString(line + "\n")
			line = indent
		}
		if len(line) > len(indent) {
			line += " "
		}
		line += w
	}
	b.WriteString(line + "\n")
}

// flagNames are the names of the flags cmd takes, --config included.
func flagNames(cmd Command) []string {
	names := []string{"config"}
	for _, f := range fieldsOf(cmd) {
		names = append(names, f.Name)
	}
	return names
}

// rolesOf returns the roles of the setting named name, and whether there
// is one.
func rolesOf(name string) ([]Role, bool) {
	for _, s := range settings() {
		if s.name == name {
			return s.roles(), true
		}
	}
	return nil, false
}

// UsageError is a command line that the command cannot take. Its text is
// one line, which the caller prints before it exits with status 2.
type UsageError struct {
	Command string // as typed after gitfleet: "up", "doctor up"
	Msg     string
	// Suggest are flags the user may have meant.
	Suggest []string
}

func (e *UsageError) Error() string {
	see := "see gitfleet " + e.Command + " -h"
	if len(e.Suggest) > 0 {
		see = "did you mean " + orList(e.Suggest) + "? " + see
	}
	return fmt.Sprintf("gitfleet %s: %s (%s)", e.Command, e.Msg, see)
}

func orList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "--" + n
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// flagError turns an error of the flag package into a UsageError.
func flagError(cmd Command, err error) *UsageError {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		name = strings.TrimLeft(name, "-")
		if roles, ok := rolesOf(name); ok {
			return &UsageError{Command: cmd.Name, Msg: fmt.Sprintf("--%s is a flag of %s, not of %s", name, commandsOf(roles), cmd.Name)}
		}
		return &UsageError{Command: cmd.Name, Msg: "unknown flag --" + name, Suggest: suggest(name, flagNames(cmd))}
	}
	// "invalid value "x" for flag -grace: ...", "flag needs an argument: -grace"
	msg = strings.Replace(msg, "flag -", "--", 1)
	msg = strings.Replace(msg, "argument: -", "argument: --", 1)
	return &UsageError{Command: cmd.Name, Msg: msg}
}

// suggest returns the flags among names that name may be a misspelling of:
// those it begins (up to three), else the nearest by edit distance, if
// near enough.
func suggest(name string, names []string) []string {
	var prefixed []string
	for _, n := range names {
		if strings.HasPrefix(n, name) {
			prefixed = append(prefixed, n)
		}
	}
	if len(prefixed) > 0 && len(prefixed) <= 3 {
		return prefixed
	}
	best, bestD := "", len(name)/4+2 // up to 1 edit in 4 characters, and 1 more
	for _, n := range names {
		if d := distance(name, n); d < bestD {
			best, bestD = n, d
		}
	}
	if best != "" {
		return []string{best}
	}
	if len(prefixed) > 3 {
		return prefixed[:3]
	}
	return nil
}

// distance is the Levenshtein distance between a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
