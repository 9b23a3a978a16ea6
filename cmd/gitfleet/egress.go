package main

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/gitfleet/gitfleet/internal/config"
	"github.com/gitfleet/gitfleet/internal/coordinator"
	"github.com/gitfleet/gitfleet/internal/egress"
	"github.com/gitfleet/gitfleet/internal/forge"
	"github.com/gitfleet/gitfleet/internal/node"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// withEgress adds the egress policy, the hosts whose paths fold case and
// the forges' feeds (whose API requests go through the egress dialer) to a
// coordinator's and a node's configurations (either may be nil).
func withEgress(cfg config.Config, ccfg *coordinator.Config, ncfg *node.Config) error {
	ports := make([]int, 0, len(cfg.EgressPorts))
	for _, s := range cfg.EgressPorts {
		p, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("--egress-ports: %q is not a port number", s)
		}
		ports = append(ports, p)
	}
	policy, err := egress.New(egress.Config{Allow: cfg.EgressAllow, AllowPrivate: cfg.AllowPrivateUpstreams,
		Schemes: cfg.EgressSchemes, Ports: ports})
	if err != nil {
		return fmt.Errorf("--egress-allow, --egress-schemes or --egress-ports: %w", err)
	}
	fold, err := repokey.NewFolding(cfg.CaseInsensitiveHost)
	if err != nil {
		return fmt.Errorf("--case-insensitive-host: %w", err)
	}
	if ccfg != nil {
		forges, err := forge.Parse(rejoinOptions(cfg.Forge), cfg.ForgeToken, os.Getenv(forge.TokensEnv))
		if err != nil {
			return fmt.Errorf("--forge or --forge-token: %w", err)
		}
		ccfg.Feeds = coordinator.FeedConfig{Forges: forges, RequestsPerHour: cfg.ForgeRequestsPerHour,
			MaxInterval: cfg.MaxInterval, MinInterval: cfg.ForgeMinAskInterval, FedMaxAge: cfg.FedMaxAge,
			Client: forge.Options{Backoff: cfg.ForgeBackoff, HTTPClient: &http.Client{Transport: &http.Transport{DialContext: (&egress.Dialer{Policy: policy}).DialContext}}}}
		ccfg.Egress = policy
		ccfg.Fold = fold
	}
	if ncfg != nil {
		ncfg.Egress = policy
		ncfg.Fold = fold
		if cfg.DNSServer != "" {
			ncfg.Resolver = egress.ResolverAt(cfg.DNSServer)
		}
	}
	return nil
}

// rejoinOptions undoes a list flag's split at commas for --forge, whose
// value HOST=KIND[,api=URL] has a comma of its own: an item that starts
// with "api=" belongs to the one before it.
func rejoinOptions(items []string) []string {
	var out []string
	for _, it := range items {
		if strings.HasPrefix(it, "api=") && len(out) > 0 {
			out[len(out)-1] += "," + it
			continue
		}
		out = append(out, it)
	}
	return out
}
