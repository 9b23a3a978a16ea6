// Package ctl is `gitfleet ctl`, the command-line client of a full node's
// API: list, show, add and remove repositories, request checks, follow
// and cancel them, read the fetch log, list and revoke nodes, and follow
// the stream of ref updates. It prints tables
// for people and, with --json, the server's JSON for scripts.
//
// It talks to the API over HTTP only: it must not read a node's data
// directory nor reach the coordinator.
package ctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

const defaultServer = "http://127.0.0.1:8080"

const usage = `usage: gitfleet ctl [flags] <command> [arguments]

commands:
  repos [--state S] [--owner N] [--prefix P] [--network NAME] [--offset N] [--limit N]
                              list repositories; --network: a fork network's members
  show KEY|URL                show one repository: attributes, refs, history
  add URL [name=value...]     add a repository (or update its attributes)
  rm KEY|URL                  remove a repository
  fetch KEY|URL [--wait]      check a repository now; --wait follows the check
  tasks                       list the queued and running checks
  cancel TASK                 stop a queued or running check
  log [KEY|URL] [--failed] [--since T] [--node N] [--before CURSOR]
                              the fetch log, newest first: one repository's or the fleet's;
                              --since takes a time (RFC 3339) or a duration back from now (24h)
  nodes                       list the fleet's nodes
  nodes revoke ID [--reason TEXT]
                              revoke a node: cut it off, re-place its repositories, refuse it from then on
  events                      follow ref updates as they become servable
  catalog                     the applied catalog and a change held back by purge protection
  confirm-purge               apply the held-back catalog change

The server and token come from --server/--token, else GITFLEET_SERVER and
GITFLEET_TOKEN, else the config file (YAML with keys server and token;
default $XDG_CONFIG_HOME/gitfleet/ctl.yaml or ~/.config/gitfleet/ctl.yaml).
The server defaults to ` + defaultServer + `.

flags:
`

// Commands lists ctl's commands, in the order of its usage: gitfleet's own
// usage names them all from here.
func Commands() []string {
	return []string{"repos", "show", "add", "rm", "fetch", "tasks", "cancel", "log", "nodes", "events", "catalog", "confirm-purge"}
}

// options are the command line's flags.
type options struct {
	server, token, config  string
	json, wait             bool
	state, prefix, network string
	reason                 string
	owner                  uint
	offset, limit          int
	failed                 bool
	since, before          string
	node                   uint
}

// commandFlags are the flags that only some commands take.
var commandFlags = map[string][]string{
	"repos": {"state", "owner", "prefix", "network", "offset", "limit"},
	"fetch": {"wait"},
	"nodes": {"reason"},
	"log":   {"failed", "since", "node", "before"},
}

// errUsage marks a command line that cannot be run (exit status 2).
var errUsage = errors.New("usage")

// Main runs `gitfleet ctl` with args (after "ctl") and returns the exit
// status: 0 success, 1 failure, 2 a bad command line.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) string) int {
	err := run(ctx, args, stdout, stderr, env)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "gitfleet ctl: %v\n(gitfleet ctl -h for help)\n", err)
		return 2
	default:
		fmt.Fprintf(stderr, "gitfleet ctl: %v\n", err)
		return 1
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) string) error {
	var o options
	fs := flag.NewFlagSet("gitfleet ctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.server, "server", "", "API base URL of the full node (env GITFLEET_SERVER)")
	fs.StringVar(&o.token, "token", "", "API token for writes (env GITFLEET_TOKEN)")
	fs.StringVar(&o.config, "config", "", "config file (YAML: server, token)")
	fs.BoolVar(&o.json, "json", false, "print the server's JSON (one object per line for events)")
	fs.BoolVar(&o.wait, "wait", false, "fetch: wait for the check to end, showing its progress")
	fs.StringVar(&o.state, "state", "", "repos: only repositories in this state")
	fs.UintVar(&o.owner, "owner", 0, "repos: only repositories owned by this node ID")
	fs.StringVar(&o.prefix, "prefix", "", "repos: only keys with this prefix")
	fs.StringVar(&o.network, "network", "", "repos: only the members of this fork network (a repository's network, as show prints it)")
	fs.IntVar(&o.offset, "offset", 0, "repos: skip this many")
	fs.IntVar(&o.limit, "limit", 0, "repos: at most this many (server default 100, at most 1000)")
	fs.StringVar(&o.reason, "reason", "", "nodes revoke: why (shown in the node list and to the node)")
	fs.BoolVar(&o.failed, "failed", false, "log: only the failed checks, fetches and pulls")
	fs.StringVar(&o.since, "since", "", "log: no entry older than this time (RFC 3339) or duration back from now (24h)")
	fs.UintVar(&o.node, "node", 0, "log: only the work of this node ID")
	fs.StringVar(&o.before, "before", "", "log: the page after this cursor (printed at the end of a page)")

	pos, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if len(pos) == 0 {
		fs.Usage()
		return fmt.Errorf("%w: no command", errUsage)
	}
	cmd, rest := pos[0], pos[1:]
	var wrong []string
	fs.Visit(func(f *flag.Flag) {
		for cmdName, names := range commandFlags {
			for _, n := range names {
				if f.Name == n && cmdName != cmd {
					wrong = append(wrong, "--"+n)
				}
			}
		}
	})
	if len(wrong) > 0 {
		return fmt.Errorf("%w: %s: not a flag of %q", errUsage, strings.Join(wrong, ", "), cmd)
	}
	if err := resolve(&o, env); err != nil {
		return err
	}
	c := newClient(o.server, o.token)
	out := &printer{w: stdout, json: o.json}

	nargs := func(n int, what string) error {
		if len(rest) != n {
			return fmt.Errorf("%w: %s takes %s", errUsage, cmd, what)
		}
		return nil
	}
	switch cmd {
	case "repos":
		if err := nargs(0, "no arguments"); err != nil {
			return err
		}
		return repos(ctx, c, out, o)
	case "show":
		if err := nargs(1, "a repository key or URL"); err != nil {
			return err
		}
		return show(ctx, c, out, keyArg(rest[0]))
	case "add":
		if len(rest) == 0 {
			return fmt.Errorf("%w: add takes a URL and name=value attributes", errUsage)
		}
		return add(ctx, c, out, rest[0], rest[1:])
	case "rm":
		if err := nargs(1, "a repository key or URL"); err != nil {
			return err
		}
		return remove(ctx, c, out, keyArg(rest[0]))
	case "fetch":
		if err := nargs(1, "a repository key or URL"); err != nil {
			return err
		}
		return fetch(ctx, c, out, keyArg(rest[0]), o.wait)
	case "tasks":
		if err := nargs(0, "no arguments"); err != nil {
			return err
		}
		return tasks(ctx, c, out)
	case "cancel":
		if err := nargs(1, "a task ID"); err != nil {
			return err
		}
		return cancel(ctx, c, out, rest[0])
	case "log":
		if len(rest) > 1 {
			return fmt.Errorf("%w: log takes at most a repository key or URL", errUsage)
		}
		key := ""
		if len(rest) == 1 {
			key = keyArg(rest[0])
		}
		return fetchLog(ctx, c, out, key, o, time.Now())
	case "nodes":
		if len(rest) > 0 && rest[0] == "revoke" {
			if len(rest) != 2 {
				return fmt.Errorf("%w: nodes revoke takes a node ID", errUsage)
			}
			return revokeNode(ctx, c, out, rest[1], o.reason)
		}
		if o.reason != "" {
			return fmt.Errorf("%w: --reason: not a flag of \"nodes\" (only of \"nodes revoke\")", errUsage)
		}
		if err := nargs(0, "no arguments, or revoke ID"); err != nil {
			return err
		}
		return nodes(ctx, c, out)
	case "events":
		if err := nargs(0, "no arguments"); err != nil {
			return err
		}
		return events(ctx, c, out, stderr)
	case "catalog":
		if err := nargs(0, "no arguments"); err != nil {
			return err
		}
		return catalogStatus(ctx, c, out)
	case "confirm-purge":
		if err := nargs(0, "no arguments"); err != nil {
			return err
		}
		return confirmPurge(ctx, c, out)
	default:
		return fmt.Errorf("%w: unknown command %q", errUsage, cmd)
	}
}

// parseInterleaved parses flags wherever they are among the arguments
// ("fetch KEY --wait" as well as "--wait fetch KEY"); "--" ends flags.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// fileConfig is the config file.
type fileConfig struct {
	Server string `yaml:"server"`
	Token  string `yaml:"token"`
}

// resolve fills the server and token from flags, else the environment,
// else the config file.
func resolve(o *options, env func(string) string) error {
	path, explicit := o.config, o.config != ""
	if !explicit {
		switch {
		case env("XDG_CONFIG_HOME") != "":
			path = filepath.Join(env("XDG_CONFIG_HOME"), "gitfleet", "ctl.yaml")
		case env("HOME") != "":
			path = filepath.Join(env("HOME"), ".config", "gitfleet", "ctl.yaml")
		}
	}
	var fc fileConfig
	if path != "" {
		data, err := os.ReadFile(path)
		switch {
		case err == nil:
			dec := yaml.NewDecoder(strings.NewReader(string(data)))
			dec.KnownFields(true)
			if err := dec.Decode(&fc); err != nil && !errors.Is(err, io.EOF) {
				return fmt.Errorf("config file %s: %w", path, err)
			}
		case explicit || !errors.Is(err, os.ErrNotExist):
			return fmt.Errorf("config file: %w", err)
		}
	}
	o.server = first(o.server, env("GITFLEET_SERVER"), fc.Server, defaultServer)
	o.token = first(o.token, env("GITFLEET_TOKEN"), fc.Token)
	return nil
}

func first(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
