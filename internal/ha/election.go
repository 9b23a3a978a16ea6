// Package ha lets two or three coordinators share one fleet through etcd,
// so that the fleet outlives the loss of any one of them. They campaign in
// an etcd election; the leader runs the coordinator on a Store kept in etcd
// (see Store) whose every write is fenced by its leadership, and the
// others wait to take over. A new leader resumes from the stored state as
// a restarted coordinator does: it moves nothing.
//
// The package holds no fleet rules: what is stored, and what a leader
// does, is the coordinator's business.
package ha

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/gitfleet/gitfleet/internal/store"
)

// Dial connects to etcd at endpoints (URLs such as http://10.0.0.1:2379)
// and checks that it answers, so that a wrong address fails at start with
// a clear error rather than in the first election. tlsConf, when set, is
// used for https endpoints.
func Dial(ctx context.Context, endpoints []string, tlsConf *tls.Config) (*clientv3.Client, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("ha: no etcd endpoint")
	}
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		TLS:         tlsConf,
		// etcd's client logs through zap; gitfleet reports what matters
		// itself, with slog.
		Logger: zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("ha: etcd client for %v: %w", endpoints, err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := client.Get(pctx, "health"); err != nil {
		client.Close()
		return nil, fmt.Errorf("ha: etcd at %v does not answer: %w", endpoints, err)
	}
	return client, nil
}

// Elector campaigns for the leadership of the coordinators that share one
// etcd prefix.
type Elector struct {
	client    *clientv3.Client
	prefix    string
	ttl       time.Duration
	advertise string
}

// NewElector returns an Elector among the coordinators under prefix (e.g.
// "/gitfleet"). advertise is this coordinator's gRPC address as nodes
// reach it: followers hand it to nodes that call them. ttl is how long a
// leader that stops answering keeps its leadership (whole seconds, at
// least one).
func NewElector(client *clientv3.Client, prefix string, ttl time.Duration, advertise string) *Elector {
	return &Elector{client: client, prefix: prefix, ttl: ttl, advertise: advertise}
}

func (e *Elector) electionPrefix() string { return e.prefix + "/leader" }

// Campaign blocks until this coordinator leads (or ctx ends), and returns
// its term. The term's Store has finished (or discarded) any batch that a
// previous leader left half written. ctx bounds the term too: it ends
// when ctx does.
func (e *Elector) Campaign(ctx context.Context) (*Term, error) {
	ttl := max(time.Second, e.ttl.Round(time.Second))
	lease, err := e.client.Grant(ctx, int64(ttl/time.Second))
	if err != nil {
		return nil, fmt.Errorf("ha: etcd lease: %w", err)
	}
	kctx, kcancel := context.WithCancel(context.Background())
	renewals, err := e.client.KeepAlive(kctx, lease.ID)
	if err != nil {
		kcancel()
		return nil, fmt.Errorf("ha: keep the etcd lease alive: %w", err)
	}
	sess, err := concurrency.NewSession(e.client, concurrency.WithLease(lease.ID), concurrency.WithContext(ctx))
	if err != nil {
		kcancel()
		return nil, fmt.Errorf("ha: etcd session: %w", err)
	}
	elec := concurrency.NewElection(sess, e.electionPrefix())
	if err := elec.Campaign(ctx, e.advertise); err != nil {
		kcancel()
		sess.Close()
		return nil, fmt.Errorf("ha: campaign: %w", err)
	}
	t := &Term{sess: sess, elec: elec, stopRenew: kcancel, done: make(chan struct{})}
	go t.watch(renewals, ttl)
	select {
	case <-sess.Done(): // the lease ran out while waiting: the key is gone
		t.Resign(context.Background())
		return nil, errors.New("ha: the lease expired during the campaign")
	default:
	}
	// Every write of the term holds only while this leader's key is the
	// one it created: once the lease expires (and another leader may have
	// been elected) the writes fail instead of overwriting the new
	// leader's state.
	t.store = NewStore(e.client, e.prefix, clientv3.Compare(clientv3.CreateRevision(elec.Key()), "=", elec.Rev()))
	if err := t.store.Recover(ctx); err != nil {
		t.Resign(context.Background())
		return nil, fmt.Errorf("ha: recover the state: %w", err)
	}
	return t, nil
}

// Leader returns the advertised address of the current leader, "" when
// none is elected.
func (e *Elector) Leader(ctx context.Context) (string, error) {
	resp, err := e.client.Get(ctx, e.electionPrefix()+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return "", fmt.Errorf("ha: who leads: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	return string(resp.Kvs[0].Value), nil
}

// Term is one leadership: from the election won to the lease lost or the
// leadership resigned.
type Term struct {
	sess      *concurrency.Session
	elec      *concurrency.Election
	store     *Store
	stopRenew context.CancelFunc
	done      chan struct{}
}

// watch closes t.done when the term may be over: the lease is gone, or
// it has not been renewed for long enough that etcd may have let it
// expire. A leader cut off from etcd hears nothing, and must stop
// directing nodes before a successor starts to: renewals come every third
// of the lease, so one may be missed, not two.
func (t *Term) watch(renewals <-chan *clientv3.LeaseKeepAliveResponse, ttl time.Duration) {
	defer close(t.done)
	deadline := ttl - max(ttl/4, 500*time.Millisecond)
	timer := time.NewTimer(deadline)
	defer timer.Stop()
	for {
		select {
		case _, ok := <-renewals:
			if !ok {
				return
			}
			timer.Reset(deadline)
		case <-timer.C:
			return
		case <-t.sess.Done():
			return
		}
	}
}

// Store is the state in etcd, writable while the term lasts.
func (t *Term) Store() store.Store { return t.store }

// Done is closed when the lease is lost, or is no longer renewed: the
// term is over, and another coordinator may soon lead.
func (t *Term) Done() <-chan struct{} { return t.done }

// Resign gives the leadership up at once (a clean stop), so that another
// coordinator takes over without waiting for the lease to run out.
func (t *Term) Resign(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	defer t.stopRenew()
	err := t.elec.Resign(ctx)
	if cerr := t.sess.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("ha: resign: %w", err)
	}
	return nil
}
