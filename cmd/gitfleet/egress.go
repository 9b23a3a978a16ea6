package main

import (
	"fmt"
	"strconv"

	"github.com/gitfleet/gitfleet/internal/config"
	"github.com/gitfleet/gitfleet/internal/coordinator"
	"github.com/gitfleet/gitfleet/internal/egress"
	"github.com/gitfleet/gitfleet/internal/node"
)

// withEgress adds the egress policy to a coordinator's and a node's
// configurations (either may be nil).
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
	if ccfg != nil {
		ccfg.Egress = policy
	}
	if ncfg != nil {
		ncfg.Egress = policy
		if cfg.DNSServer != "" {
			ncfg.Resolver = egress.ResolverAt(cfg.DNSServer)
		}
	}
	return nil
}
