package metastore

import (
	"context"
	"fmt"
	"slices"
)

// ClaimDirectory records dirID as the data directory of broker, before it
// hosts any replica. A broker whose directory changed (a new disk, or a
// wiped one: its meta.properties has a new directory.id) while it is a
// replica of some partition is refused:
//   - as a raft voter its votes and log are gone, and as the same voter it
//     could grant a second vote in a term and let two leaders be elected;
//   - as a learner (read broker) the leaders remember what it had
//     acknowledged and raft never sends that again, so it would serve
//     nothing of the history, silently.
//
// It must first be taken out of those partitions (reassignment for
// voters; a read broker's learner replicas are retired once it has been
// unregistered for the metastore's learner grace), or start under a new
// node.id.
func (c *Client) ClaimDirectory(ctx context.Context, broker int32, dirID string) error {
	_, err := c.write(ctx, command{Op: opClaimDirectory, BrokerID: broker, Name: dirID})
	return err
}

func (a *applier) claimDirectory(c *command) result {
	if c.Name == "" || c.BrokerID < 0 {
		return result{Err: errCode(ErrInvalidRequest)}
	}
	b := a.tx.Bucket(bucketBrokerDirs)
	k := brokerKey(c.BrokerID)
	if cur := b.Get(k); cur != nil && string(cur) != c.Name {
		var voterOf, learnerOf []string
		for _, t := range a.topics() {
			if isSharedTopic(t) {
				// A shared partition's data is in shared storage and
				// the metastore; a broker's disk holds only a cache of
				// it, which a new disk rebuilds.
				continue
			}
			for _, p := range t.Partitions {
				name := fmt.Sprintf("%s-%d", t.Name, p.ID)
				switch {
				case slices.Contains(p.Voters, c.BrokerID) || slices.Contains(p.Target, c.BrokerID):
					voterOf = append(voterOf, name)
				case slices.Contains(p.Learners, c.BrokerID):
					learnerOf = append(learnerOf, name)
				}
			}
		}
		lost := fmt.Sprintf("broker %d was registered with data directory %s, but its data directory is now %s "+
			"(a new or wiped disk): its raft state is lost", c.BrokerID, cur, c.Name)
		switch {
		case len(voterOf) > 0:
			return result{Err: "msg:" + fmt.Sprintf("%s, and it is a voter of %d partitions (%v); rejoining as the same voter "+
				"could elect two leaders in one term. Reassign those partitions to other brokers first, or start this broker with a new node.id",
				lost, len(voterOf), voterOf[:min(len(voterOf), 5)])}
		case len(learnerOf) > 0:
			return result{Err: "msg:" + fmt.Sprintf("%s, and it is a learner of %d partitions (%v), whose leaders would not send it "+
				"again what it had acknowledged. Start this broker with a new node.id, or start it once its learner replicas are retired "+
				"(after it has been unregistered for the metastore's learner grace)",
				lost, len(learnerOf), learnerOf[:min(len(learnerOf), 5)])}
		}
	}
	a.put(b, k, []byte(c.Name))
	return result{}
}
