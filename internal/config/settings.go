package config

import (
	"cmp"
	"flag"
	"reflect"
	"slices"
	"strings"

	"github.com/gitfleet/gitfleet/internal/forge"
)

// PerForge is a setting with a value for each kind of forge whose webhooks
// the full node takes, by kind. Its flags and YAML keys come from forge's
// table, one a kind in the table's order: the field's `name` tag with
// {kind} replaced by the kind ("webhook-secret-github"), its `help` with
// {forge} replaced by the forge's name. A forge added to the table has its
// setting without a line here.
type PerForge map[forge.Kind]string

var perForgeType = reflect.TypeOf(PerForge(nil))

// setting is one flag and YAML key: a field of Config, or one kind's entry
// of a PerForge field.
type setting struct {
	field      reflect.StructField
	index      int // of the field in Config
	name, help string
	kind       forge.Kind // of a PerForge entry
}

// settings lists every setting in the struct's order, the entries of a
// PerForge field in the forge table's.
func settings() []setting {
	t := reflect.TypeOf(Config{})
	out := make([]setting, 0, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Type != perForgeType {
			out = append(out, setting{field: f, index: i, name: f.Tag.Get("name"), help: expandHelp(f.Tag.Get("help"))})
			continue
		}
		for _, k := range forge.Kinds() {
			w := forge.WebhookOf(k)
			if w == nil {
				continue
			}
			out = append(out, setting{field: f, index: i, kind: k,
				name: strings.ReplaceAll(f.Tag.Get("name"), "{kind}", string(k)),
				help: expandHelp(strings.ReplaceAll(f.Tag.Get("help"), "{forge}", w.Name))})
		}
	}
	return out
}

// roles returns the roles the setting applies to.
func (s setting) roles() []Role { return parseRoles(s.field.Tag.Get("roles")) }

// value returns the setting's value in c, formatted as docs and help show
// it.
func (s setting) value(c *Config) string {
	f := reflect.ValueOf(c).Elem().Field(s.index)
	if s.kind != "" {
		return f.Interface().(PerForge)[s.kind]
	}
	return format(f)
}

// set sets the setting in c from the text v.
func (s setting) set(c *Config, v string) error {
	f := reflect.ValueOf(c).Elem().Field(s.index)
	if s.kind != "" {
		return perForgeFlag{m: f.Addr().Interface().(*PerForge), kind: s.kind}.Set(v)
	}
	return set(f, v)
}

// perForgeFlag sets one kind's entry of a PerForge from a flag.
type perForgeFlag struct {
	m    *PerForge
	kind forge.Kind
}

func (f perForgeFlag) String() string {
	if f.m == nil {
		return ""
	}
	return (*f.m)[f.kind]
}

func (f perForgeFlag) Set(v string) error {
	if *f.m == nil {
		*f.m = PerForge{}
	}
	(*f.m)[f.kind] = v
	return nil
}

var _ flag.Value = perForgeFlag{}

// expandHelp fills in what a help text says of forge's table:
// {forge-kinds} the kinds ("github, gitlab, gitea or gitee"), {forge-hosts}
// the hosts configured by default, {auto-add-forges} the forges whose
// webhooks are trusted to add a repository.
func expandHelp(help string) string {
	if !strings.Contains(help, "{") {
		return help
	}
	kinds := forge.Kinds()
	var names, autoAdd []string
	for _, k := range kinds {
		names = append(names, string(k))
		if w := forge.WebhookOf(k); w != nil && w.AutoAdd {
			autoAdd = append(autoAdd, w.Name)
		}
	}
	var hosts []forge.Forge
	for _, f := range forge.DefaultForges() {
		hosts = append(hosts, f)
	}
	slices.SortFunc(hosts, func(a, b forge.Forge) int {
		return cmp.Or(cmp.Compare(slices.Index(kinds, a.Kind), slices.Index(kinds, b.Kind)), strings.Compare(a.Host, b.Host))
	})
	hostNames := make([]string, len(hosts))
	for i, f := range hosts {
		hostNames[i] = f.Host
	}
	return strings.NewReplacer(
		"{forge-kinds}", joinWords(names, "or"),
		"{forge-hosts}", joinWords(hostNames, "and"),
		"{auto-add-forges}", joinWords(autoAdd, "or"),
	).Replace(help)
}

// joinWords joins words for people: "a, b or c".
func joinWords(words []string, conj string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " " + conj + " " + words[len(words)-1]
}
