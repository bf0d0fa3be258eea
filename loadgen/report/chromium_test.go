package report

// The report opened by a real browser: headless Chromium renders a
// realistic result to a screenshot, and every chart must have painted its
// own series colours (see Palette) in its own band of the page. Chromium
// is a Debian package that .ci/run installs: without it these tests skip
// on a developer machine and fail under CI=true.

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/html"
)

const chromiumTimeout = 60 * time.Second

// minChartPixels is how many pixels of its palette a painted chart must
// show. A legend alone paints about 60 per series (an 18×3 stroke); the
// realistic result's lines paint thousands.
const minChartPixels = 600

func needChromium(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("chromium")
	if err != nil {
		p, err = exec.LookPath("/usr/bin/chromium")
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("chromium missing under CI (.ci/run installs it): %v", err)
		}
		t.Skipf("chromium not available: %v", err)
	}
	return p
}

// runChromium runs headless Chromium on the file page with extra flags
// and returns its stdout. It runs in its own process group, killed as a
// whole on timeout so no renderer outlives the test.
func runChromium(t *testing.T, bin, page string, extra ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), chromiumTimeout)
	defer cancel()
	args := append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-extensions", "--hide-scrollbars", "--force-color-profile=srgb", "--force-device-scale-factor=1",
		"--user-data-dir=" + t.TempDir(), "--window-size=1280,3200",
	}, extra...)
	args = append(args, "file://"+page)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // leftover helpers, if any
	}
	if ctx.Err() != nil {
		t.Fatalf("chromium timed out after %v; stderr:\n%s", chromiumTimeout, stderr.String())
	}
	if err != nil {
		t.Fatalf("chromium: %v; stderr:\n%s", err, stderr.String())
	}
	return stdout.Bytes()
}

func writeReport(t *testing.T) string {
	t.Helper()
	page := filepath.Join(t.TempDir(), "report.html")
	if err := os.WriteFile(page, []byte(render(t, realisticResult())), 0o644); err != nil {
		t.Fatal(err)
	}
	return page
}

func TestChromiumPaintsEveryChart(t *testing.T) {
	bin := needChromium(t)
	page := writeReport(t)
	shot := filepath.Join(t.TempDir(), "shot.png")
	runChromium(t, bin, page, "--screenshot="+shot)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("decoding screenshot: %v", err)
	}
	if keep := os.Getenv("STRATA_TEST_REPORT_SHOT"); keep != "" {
		if b, err := os.ReadFile(shot); err == nil {
			_ = os.WriteFile(keep, b, 0o644)
		}
	}
	if b := img.Bounds(); b.Dx() != 1280 || b.Dy() != 3200 {
		t.Fatalf("screenshot is %v, want 1280×3200", b)
	}
	counts := countPalette(img)
	var medians []int
	for _, name := range ChartNames {
		c := counts[name]
		t.Logf("%-22s %6d pixels, rows %d..%d", name, c.n, c.minY, c.maxY)
		if c.n < minChartPixels {
			t.Errorf("chart %s painted %d pixels of its colours, want > %d: missing or blank", name, c.n, minChartPixels)
			continue
		}
		medians = append(medians, c.medianY())
	}
	if len(medians) == len(ChartNames) && !slices.IsSorted(medians) {
		t.Errorf("charts' median rows %v are not in page order %v", medians, ChartNames)
	}
}

func TestChromiumDOMHasEveryChart(t *testing.T) {
	bin := needChromium(t)
	dom := runChromium(t, bin, writeReport(t), "--dump-dom")
	doc, err := html.Parse(bytes.NewReader(dom))
	if err != nil {
		t.Fatalf("parsing Chromium's DOM: %v", err)
	}
	names, _ := charts(doc)
	if !slices.Equal(names, ChartNames) {
		t.Fatalf("Chromium's DOM has svgs %v, want %v", names, ChartNames)
	}
}

type paletteCount struct {
	n          int
	minY, maxY int
	rows       []int // y of every matching pixel
}

func (c paletteCount) medianY() int {
	ys := slices.Clone(c.rows)
	sort.Ints(ys)
	return ys[len(ys)/2]
}

// countPalette counts, per chart, the pixels within a small tolerance of
// one of its palette colours.
func countPalette(img image.Image) map[string]paletteCount {
	type target struct {
		chart   string
		r, g, b int
	}
	var targets []target
	for chart, series := range Palette {
		for _, hex := range series {
			r, g, b := mustHex(hex)
			targets = append(targets, target{chart, r, g, b})
		}
	}
	out := map[string]paletteCount{}
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			r16, g16, b16, _ := img.At(x, y).RGBA()
			r, g, b := int(r16>>8), int(g16>>8), int(b16>>8)
			for _, tg := range targets {
				if abs(r-tg.r) <= 6 && abs(g-tg.g) <= 6 && abs(b-tg.b) <= 6 {
					c := out[tg.chart]
					if c.n == 0 || y < c.minY {
						c.minY = y
					}
					c.maxY = max(c.maxY, y)
					c.n++
					c.rows = append(c.rows, y)
					out[tg.chart] = c
					break
				}
			}
		}
	}
	return out
}

func mustHex(s string) (int, int, int) {
	v, err := strconv.ParseUint(strings.TrimPrefix(s, "#"), 16, 32)
	if err != nil || len(s) != 7 {
		panic(fmt.Sprintf("bad palette colour %q", s))
	}
	return int(v >> 16), int(v >> 8 & 0xff), int(v & 0xff)
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// TestCountPaletteFindsOnlyPaintedCharts checks the pixel counter itself
// on a synthetic image: a chart whose colour is absent counts zero.
func TestCountPaletteFindsOnlyPaintedCharts(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 100, 100))
	r, g, b := mustHex(Palette["lag"]["lag"])
	for x := 0; x < 100; x++ {
		for y := 40; y < 43; y++ {
			i := img.PixOffset(x, y)
			img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = uint8(r), uint8(g), uint8(b), 255
		}
	}
	c := countPalette(img)
	if c["lag"].n != 300 || c["lag"].minY != 40 || c["lag"].maxY != 42 {
		t.Errorf("lag count %+v, want 300 pixels in rows 40..42", c["lag"])
	}
	for _, name := range ChartNames[:3] {
		if c[name].n != 0 {
			t.Errorf("%s counted %d pixels of an image without its colours", name, c[name].n)
		}
	}
}
