package node

import (
	"context"
	"fmt"

	"github.com/gitfleet/gitfleet/internal/egress"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// egressDialer is the dialer of every connection the node makes to an
// upstream: git's, through the node's egress proxy, and the full node's
// outgoing webhooks.
func egressDialer(cfg Config) *egress.Dialer {
	p := cfg.Egress
	if p == nil {
		p = egress.Default(cfg.AllowPrivate)
	}
	return &egress.Dialer{Policy: p, Resolver: cfg.Resolver}
}

// SyncUpstream brings key's mirror up to date from an upstream URL: the
// URL is checked against the egress policy first (the scheme, the port, the
// host and, for git:// and ssh://, its answers), at every fetch, and git's
// connections then go through the egress proxy, which checks the address
// it dials.
func (n *Node) SyncUpstream(ctx context.Context, key repokey.Key, url string) (mirror.Result, error) {
	if err := n.dialer.CheckURL(ctx, url); err != nil {
		return mirror.Result{}, fmt.Errorf("mirror %s: %w", key, err)
	}
	return n.mirror.SyncIn(ctx, key, url, n.networkOf(key))
}

// networkOf is the object pool key's mirror shares history in: the
// network the coordinator assigned it with (Repo.network), or, for a
// repository this node does not own, the one its role knows (a full
// node's RepoState.network); "" for a standalone mirror.
func (n *Node) networkOf(key repokey.Key) string {
	n.mu.Lock()
	o := n.owned[key.String()]
	n.mu.Unlock()
	if o != nil {
		return o.network
	}
	if nr, ok := n.role.(interface{ Network(key repokey.Key) string }); ok {
		return nr.Network(key)
	}
	return ""
}

// archives tells whether key's mirror keeps the tips that rewrites take
// away (mirror.ArchivePolicy.Of): as the coordinator assigned it
// (Repo.archive), or, for a repository this node does not own, as its role
// knows (a full node's RepoState.attrs).
func (n *Node) archives(key repokey.Key) bool {
	n.mu.Lock()
	o := n.owned[key.String()]
	n.mu.Unlock()
	if o != nil {
		return o.archive
	}
	if ar, ok := n.role.(interface{ Archives(key repokey.Key) bool }); ok {
		return ar.Archives(key)
	}
	return false
}

// replaceUpstream copies key's mirror again from an upstream URL (the
// repair of a corrupt mirror: mirror.Replace), with the same check of the
// URL against the egress policy first as SyncUpstream.
func (n *Node) replaceUpstream(ctx context.Context, key repokey.Key, url string) (gitcmd.Refs, error) {
	if err := n.dialer.CheckURL(ctx, url); err != nil {
		return gitcmd.Refs{}, fmt.Errorf("mirror %s: repair: %w", key, err)
	}
	return n.mirror.Replace(ctx, key, url)
}
