package coordinator

// placeholder until the KIP-848 implementation lands
type consumerGroup struct{ members map[string]*consumerMember }
type consumerMember struct{}
type storedConsumer struct{}

func newConsumerGroup(g *group) *consumerGroup                           { return &consumerGroup{} }
func (cg *consumerGroup) restore(*storedConsumer)                        {}
func (cg *consumerGroup) encode() *storedConsumer                        { return nil }
func (cg *consumerGroup) stopTimers()                                    {}
func (cg *consumerGroup) stateLocked() string                            { return "Empty" }
func (cg *consumerGroup) subscribedNamesLocked(*consumerMember) []string { return nil }
func (cg *consumerGroup) validateCommitLocked(simple bool, gen int32, id string, v int16) int16 {
	return 0
}
func (cg *consumerGroup) validateFetchLocked(id *string, epoch int32) int16 { return 0 }
func (g *group) becomeClassicLocked()                                       { g.typ = typeClassic; g.cg = nil }
