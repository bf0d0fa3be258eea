package controller_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/google/uuid"

	"github.com/strata-io/strata/controller"
	"github.com/strata-io/strata/controller/metadata"
)

// A quorum of one: register a broker, create a topic, and follow the
// metadata log as a broker would.
func Example() {
	dir, _ := os.MkdirTemp("", "strata-example-")
	defer os.RemoveAll(dir)
	ln, _ := net.Listen("tcp", "127.0.0.1:0") // the CONTROLLER listener
	cfg, err := controller.ParseConfig(map[string]string{
		"node.id":                  "1",
		"process.roles":            "broker,controller",
		"controller.quorum.voters": "1@" + ln.Addr().String(),
		"metadata.log.dir":         dir,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := controller.Open(controller.Options{Config: cfg, Listener: ln})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	reg, err := c.RegisterBroker(ctx, metadata.RegisterBrokerRequest{BrokerID: 1, IncarnationID: uuid.New(),
		Listeners: []metadata.Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092, SecurityProtocol: "PLAINTEXT"}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	c.BrokerHeartbeat(ctx, metadata.BrokerHeartbeatRequest{BrokerID: 1, BrokerEpoch: reg.BrokerEpoch, CurrentMetadataOffset: 1 << 40})
	res, _ := c.CreateTopics(ctx, metadata.CreateTopicsRequest{Topics: []metadata.CreateTopic{{Name: "orders", NumPartitions: 3, ReplicationFactor: 1}}})
	fmt.Println("create orders:", res[0].Err)

	// A broker follows the log from the start; remote brokers use
	// controller.NewClient(...).Watch the same way.
	w, _ := c.Watch(ctx, 0)
	defer w.Close()
	view := metadata.NewState()
	for view.Offset() < c.State().Offset() {
		d, err := w.Next(ctx)
		if err != nil {
			fmt.Println(err)
			return
		}
		if d.Image != nil {
			view = d.Image
			continue
		}
		view.ApplyBatch(d.Offset, d.Records)
	}
	t, _ := view.TopicByName("orders")
	fmt.Println("broker sees", t.Name, "with", t.NumPartitions, "partitions")
	// Output:
	// create orders: <nil>
	// broker sees orders with 3 partitions
}
