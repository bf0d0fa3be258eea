package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Decompression exists only so that Validate can count and frame-check the
// records of a compressed batch (and Records can hand them out); the stored
// batch stays compressed exactly as the producer sent it.
//
// A compressed batch is inflated whole into a pooled buffer. Zip bombs are
// the danger, for memory and for CPU: a 2 KiB zstd batch of RLE blocks
// inflates to 64 MiB, and producing those 64 MiB took 0.5-1.3 s of CPU on the
// project's machines (4 MiB: 50-120 ms; TestValidateBoundsDecompressionByRatio
// logs the times). So every decoder stops, and the batch is rejected as
// ErrCorrupt, past
//
//	limit = min(64 MiB, max(4 MiB, 256 x compressed size))
//
// 4 MiB is four times the largest batch franz-go and librdkafka build by
// default (about 1 MB uncompressed), so even all-zero test payloads pass;
// beyond that a batch must come from a producer configured for huge batches,
// and real data (logs, JSON, Avro) compresses 3-30x, far below 256x. 64 MiB
// caps what one validation may hold. Where the format announces its size
// (snappy blocks, zstd frames that declare it) the check runs before
// decoding; otherwise while decoding (gzip and lz4 through readBounded, zstd
// into a buffer of limited capacity), so no decoder writes more than
// limit+1 bytes.
const (
	maxDecompressedDefault = 64 << 20
	minDecompressLimit     = 4 << 20
	maxCompressionRatio    = 256
)

// maxDecompressed is the absolute limit in force: maxDecompressedDefault,
// lowered only by tests (which cannot afford 64 MiB per codec under -race).
var maxDecompressed = maxDecompressedDefault

// decompressLimit is the most that compressed bytes may inflate to.
func decompressLimit(compressed int) int {
	return min(maxDecompressed, max(minDecompressLimit, maxCompressionRatio*compressed))
}

// maxPooledBuf is the largest buffer returned to bufPool, so that one huge
// batch does not pin its buffer for the life of the process.
const maxPooledBuf = 4 << 20

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if b == nil || cap(*b) > maxPooledBuf {
		return
	}
	*b = (*b)[:0]
	bufPool.Put(b)
}

// recordData returns the uncompressed records of the batch h = b. For an
// uncompressed batch it is b's own tail and buf is nil; otherwise it lives
// in *buf, which the caller returns with putBuf once done with data.
func recordData(h Header, b []byte) (data []byte, buf *[]byte, err error) {
	src := b[HeaderSize:]
	codec := h.Codec()
	if codec == CodecNone {
		return src, nil, nil
	}
	limit := decompressLimit(len(src))
	buf = getBuf()
	switch codec {
	case CodecGzip:
		*buf, err = gunzip(*buf, src, limit)
	case CodecSnappy:
		*buf, err = unsnappy(*buf, src, limit)
	case CodecLZ4:
		*buf, err = unlz4(*buf, src, limit)
	case CodecZstd:
		*buf, err = unzstd(*buf, src, limit)
	default:
		putBuf(buf)
		return nil, nil, errf(ErrCompression, "codec %d", int8(codec))
	}
	if err != nil {
		putBuf(buf)
		if errors.Is(err, errTooBig) {
			return nil, nil, errf(ErrCorrupt, "%d bytes of %s records inflate beyond %d bytes", len(src), codec, limit)
		}
		return nil, nil, errf(ErrCorrupt, "%s records: %v", codec, err)
	}
	return *buf, buf, nil
}

var errTooBig = errors.New("decompressed size above the limit")

// readBounded reads r to EOF into dst[:0], growing it as needed, and fails
// with errTooBig as soon as more than limit bytes come out.
func readBounded(dst []byte, r io.Reader, limit int) ([]byte, error) {
	dst = dst[:0]
	for {
		if len(dst) == cap(dst) {
			if len(dst) > limit {
				return dst, errTooBig
			}
			// One byte past the limit is enough to tell it was exceeded.
			newCap := min(max(2*cap(dst), 64<<10), limit+1)
			grown := make([]byte, len(dst), newCap)
			copy(grown, dst)
			dst = grown
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if len(dst) > limit {
			return dst, errTooBig
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}

// gzipState is a pooled gzip reader and the bytes.Reader it reads from.
type gzipState struct {
	src bytes.Reader
	zr  *gzip.Reader // nil until the first successful header
}

var gzipPool = sync.Pool{New: func() any { return new(gzipState) }}

// gunzip inflates src, which may hold several concatenated gzip members
// (Java's GZIPInputStream accepts them too).
func gunzip(dst, src []byte, limit int) ([]byte, error) {
	st := gzipPool.Get().(*gzipState)
	defer func() {
		st.src.Reset(nil)
		gzipPool.Put(st)
	}()
	st.src.Reset(src)
	if st.zr == nil {
		zr, err := gzip.NewReader(&st.src)
		if err != nil {
			return dst[:0], err
		}
		st.zr = zr
	} else if err := st.zr.Reset(&st.src); err != nil {
		return dst[:0], err
	}
	return readBounded(dst, st.zr, limit)
}

// xerialHeader opens snappy data framed by snappy-java's SnappyOutputStream,
// which Kafka's Java clients use:
//
//	magic "\x82SNAPPY\x00" (8) | version int32 (4) | compatible version int32 (4)
//	then chunks: length int32 (4, big endian) | raw snappy block (length)
//
// librdkafka and franz-go send one raw snappy block instead.
var xerialHeader = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const xerialHeaderSize = 16

// unsnappy decodes raw or xerial-framed snappy, checking each block's
// announced size against the limit before decoding it.
func unsnappy(dst, src []byte, limit int) ([]byte, error) {
	dst = dst[:0]
	if !bytes.HasPrefix(src, xerialHeader) {
		return appendSnappyBlock(dst, src, limit)
	}
	if len(src) < xerialHeaderSize {
		return dst, errors.New("short xerial header")
	}
	for p := xerialHeaderSize; p < len(src); {
		if len(src)-p < 4 {
			return dst, errors.New("truncated xerial chunk length")
		}
		n := int(binary.BigEndian.Uint32(src[p:]))
		p += 4
		if n > len(src)-p {
			return dst, errors.New("xerial chunk runs past the end")
		}
		var err error
		if dst, err = appendSnappyBlock(dst, src[p:p+n], limit); err != nil {
			return dst, err
		}
		p += n
	}
	return dst, nil
}

// appendSnappyBlock decodes one raw snappy block onto the end of dst.
func appendSnappyBlock(dst, block []byte, limit int) ([]byte, error) {
	n, err := s2.DecodedLen(block)
	if err != nil {
		return dst, err
	}
	if n > limit-len(dst) {
		return dst, errTooBig
	}
	if cap(dst)-len(dst) < n {
		grown := make([]byte, len(dst), max(len(dst)+n, 2*cap(dst)))
		copy(grown, dst)
		dst = grown
	}
	out, err := s2.Decode(dst[len(dst):len(dst)+n], block)
	if err != nil {
		return dst, err
	}
	return dst[:len(dst)+len(out)], nil
}

// lz4State is a pooled LZ4 frame reader and its source.
type lz4State struct {
	src bytes.Reader
	zr  *lz4.Reader
}

var lz4Pool = sync.Pool{New: func() any {
	st := new(lz4State)
	st.zr = lz4.NewReader(nil)
	return st
}}

// unlz4 decodes the LZ4 frame format (Kafka's KafkaLZ4BlockOutputStream for
// magic >= 1 writes standard frames).
func unlz4(dst, src []byte, limit int) ([]byte, error) {
	st := lz4Pool.Get().(*lz4State)
	defer func() {
		st.zr.Reset(nil)
		st.src.Reset(nil)
		lz4Pool.Put(st)
	}()
	st.src.Reset(src)
	st.zr.Reset(&st.src)
	return readBounded(dst, st.zr, limit)
}

// zstd is decoded with DecodeAll into a buffer of fixed capacity, under
// WithDecodeAllCapLimit so the decoder cannot write past it (nor allocate a
// window: DecodeAll keeps its history in the output). When the first frame
// declares its content size (franz-go and librdkafka use one-shot
// compression, which does) the capacity is that size, checked against the
// limit first. Otherwise (Java's zstd-jni stream declares none, and more
// frames may follow the first) it starts from a guess, eight times the
// input, and when decoding fails decodes again with four times the capacity,
// up to the limit: a bomb costs at most 4/3 of decoding limit bytes. Failures
// are retried, not only ErrDecoderSizeExceeded, because a capacity overrun
// inside a block surfaces as a plain "output bigger than max block size"
// error; only the errors zstdInputError lists, which bad input alone causes,
// are final at once.
//
// The stream decoder is not used: measured on an 18 KiB batch it ran at
// 180 MB/s against DecodeAll's 400-580 MB/s, it allocates its whole window
// up front (a 100-byte frame declaring 60 MiB cost 60 MiB), and DecodeAll
// without a capacity limit grows its output by repeated copying, which made
// a 64 MiB bomb three times slower.
//
// Decoders run with concurrency 1, so they start no goroutines and one that
// the pool drops needs no Close.
var zstdPool = sync.Pool{New: func() any {
	zr, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxMemory(maxDecompressedDefault),
		zstd.WithDecodeAllCapLimit(true),
	)
	if err != nil {
		panic("batch: zstd decoder options: " + err.Error())
	}
	return zr
}}

// zstdFirstGuess is the smallest capacity tried for a frame of unknown size.
const zstdFirstGuess = 64 << 10

func unzstd(dst, src []byte, limit int) ([]byte, error) {
	var n int
	var fh zstd.Header
	if fh.Decode(src) == nil && fh.HasFCS {
		if fh.FrameContentSize > uint64(limit) {
			return dst[:0], errTooBig
		}
		n = int(fh.FrameContentSize)
	} else {
		n = min(limit, max(cap(dst), 8*len(src), zstdFirstGuess))
	}
	d := zstdPool.Get().(*zstd.Decoder)
	defer zstdPool.Put(d)
	for {
		if cap(dst) < n {
			dst = make([]byte, 0, n)
		}
		out, err := d.DecodeAll(src, dst[:0:n])
		if err == nil {
			// out lies in dst's array; keep dst's full capacity for the pool.
			return dst[:len(out)], nil
		}
		if n >= limit {
			if errors.Is(err, zstd.ErrDecoderSizeExceeded) {
				return dst[:0], errTooBig
			}
			return dst[:0], fmt.Errorf("%w (decoding into the %d-byte limit)", err, limit)
		}
		if zstdInputError(err) {
			return dst[:0], err
		}
		// Unknown size, more frames than the first declared, or corrupt:
		// retry with more room.
		n = min(limit, 4*max(n, zstdFirstGuess))
	}
}

// zstdInputError reports errors that only bad input causes, never a lack of
// output capacity, so retrying with more room is pointless.
func zstdInputError(err error) bool {
	for _, e := range []error{
		zstd.ErrMagicMismatch, zstd.ErrCRCMismatch, zstd.ErrReservedBlockType,
		zstd.ErrWindowSizeExceeded, zstd.ErrWindowSizeTooSmall, zstd.ErrUnknownDictionary,
		zstd.ErrFrameSizeExceeded, zstd.ErrFrameSizeMismatch,
	} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
