package gitserve

// SetBeforeRun sets the function a shared run calls once it has its slot,
// before git starts: tests hold runs there.
func SetBeforeRun(h *Handler, f func(key string)) { h.beforeRun = f }
