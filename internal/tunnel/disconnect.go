package tunnel

// Disconnect closes node nodeID's tunnel, if it has one, and one whose
// handshake is under way, and reports whether it had one. The node may
// connect again: the Server's auth callback decides whether it is admitted.
func (s *Server) Disconnect(nodeID uint32) bool {
	s.mu.Lock()
	sess := s.sessions[nodeID]
	delete(s.sessions, nodeID)
	s.epoch++
	if s.cutAt == nil {
		s.cutAt = map[uint32]uint64{}
	}
	s.cutAt[nodeID] = s.epoch
	s.mu.Unlock()
	if sess == nil {
		return false
	}
	_ = sess.Close()
	s.logger.Info("tunnel closed by the full node", "node", nodeID)
	return true
}
