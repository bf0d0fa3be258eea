// Package netbuf bounds the memory that network peers make a process
// allocate for the frames they send: a [Budget] of bytes shared by every
// connection of a node (Kafka's queued.max.request.bytes), taken before a
// frame's body is read and given back once the request is done, and
// [Budget.ReadFrame], which grows a frame's buffer as its bytes arrive
// instead of allocating what the size prefix claims, and counts the
// buffers it holds ([Budget.Reading]) so tests assert exact figures.
// [Budget.ReadFramePooled] is the same read into recycled power-of-two
// buffers, given back with [PutFrame] by a caller that knows nothing
// keeps a view of the frame (the broker does so for Produce requests).
//
// It owns no sockets, deadlines or framing formats: the broker's Kafka
// listener and the controller's CONTROLLER listener read their own size
// prefixes, then call these. A leaf: nothing from broker, controller or
// storage is imported.
//
//	b := netbuf.NewBudget(256 << 20)
//	if err := b.Acquire(ctx, int64(size)); err != nil { ... } // waits while the node is full
//	body, err := b.ReadFrame(br, size)                        // allocates as bytes arrive
//	... handle the request ...
//	b.Release(int64(size))
package netbuf
