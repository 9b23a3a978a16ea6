package e2e

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// soakEtcdPrefix is the prefix of the soak fleet's keys in etcd.
const soakEtcdPrefix = "/soak"

// leader is the coordinator that leads now, as the election key in etcd
// names it (the advertised address of the first candidate by creation,
// as etcd's election recipe reads it), or "" if none does or etcd does
// not answer.
func (s *soakFleet) leader() string {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{s.etcd}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return ""
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, soakEtcdPrefix+"/leader/", clientv3.WithFirstCreate()...)
	if err != nil || len(resp.Kvs) == 0 {
		return ""
	}
	addr := string(resp.Kvs[0].Value)
	for c, l := range s.adv {
		if l.addr == addr {
			return c
		}
	}
	return ""
}
