package mirror

// Probe looks at the mirror in dir, for tests that hold copies of mirrors
// outside a store's keys.
var Probe = probe
