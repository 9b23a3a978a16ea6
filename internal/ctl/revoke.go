package ctl

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
)

// revokeNode revokes node id (a decimal node ID) with the given reason.
func revokeNode(ctx context.Context, c *client, out *printer, id, reason string) error {
	n, err := strconv.ParseUint(id, 10, 32)
	if err != nil || n == 0 {
		return fmt.Errorf("%w: node ID %q: want a positive integer", errUsage, id)
	}
	var body any
	if reason != "" {
		body = map[string]string{"reason": reason}
	}
	_, data, err := c.call(ctx, http.MethodPost, fmt.Sprintf("/api/v1/nodes/%d/revoke", n), body)
	if err != nil {
		return err
	}
	if out.json {
		return out.raw(data)
	}
	_, err = fmt.Fprintf(out.w, "revoked node %d\n", n)
	return err
}
