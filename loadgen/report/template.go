package report

import "html/template"

// The page: inline CSS only, no script, and a Content-Security-Policy that
// forbids every remote load, so the file behaves the same offline and a
// mistake that adds a remote reference shows up as a blocked load rather
// than a silent network call. Charts come first after the summary so all
// six fit in a 1280×3200 screenshot.
var pageTemplate = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 16px 40px; color: #222; background: #fff; }
h1 { font-size: 22px; margin: 4px 0; }
h2 { font-size: 18px; margin: 22px 0 6px; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th { background: #f3f3f3; }
td.k, th.k { text-align: left; }
figure { margin: 10px 0 18px; }
figcaption { font-size: 12px; color: #555; margin-top: 2px; }
.meta { font-size: 13px; color: #555; }
.swatch { display: inline-block; width: 14px; height: 4px; vertical-align: middle; }
ul.errors li { font-family: ui-monospace, monospace; font-size: 12px; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
{{- if .IsCompare}}
<p class="meta">{{len .Compare}} runs compared.</p>
<h2>Runs</h2>
<table id="compare">
<tr><th class="k">run</th><th class="k">scenario</th><th class="k">target</th><th>produce records/s</th><th>produce MB/s</th><th>consume MB/s</th><th>publish p50 (ms)</th><th>publish p95 (ms)</th><th>publish p99 (ms)</th><th>publish p99.9 (ms)</th><th>e2e p50 (ms)</th><th>e2e p99 (ms)</th><th>e2e p99.9 (ms)</th><th>errors</th><th>produce cv</th><th>broker CPU cores (mean)</th><th>broker RSS (max)</th><th class="k">builds and machine</th></tr>
{{- range .Compare}}
<tr><td class="k"><span class="swatch" style="background: {{.Color}}"></span> {{.Label}}</td><td class="k">{{.Scenario}}</td><td class="k">{{.Target}}</td><td>{{.RecordsPerSec}}</td><td>{{.MBPerSec}}</td><td>{{.ConsumeMBPerSec}}</td><td>{{.PubP50}}</td><td>{{.PubP95}}</td><td>{{.PubP99}}</td><td>{{.PubP999}}</td><td>{{.E2EP50}}</td><td>{{.E2EP99}}</td><td>{{.E2EP999}}</td><td>{{.Errors}}</td><td>{{.ProduceCV}}</td><td>{{.BrokerCPU}}</td><td>{{.BrokerRSS}}</td><td class="k">{{.Versions}}</td></tr>
{{- end}}
</table>
{{- else}}
<p class="meta">target <b>{{.R.Target}}</b> · brokers {{range $i, $b := .R.Brokers}}{{if $i}}, {{end}}{{$b}}{{end}} · started {{.R.StartedAt}} · measured {{printf "%.1f" .R.Duration}} s</p>
<h2>Summary</h2>
<table id="summary">
<tr><th class="k">side</th><th>records</th><th>records/s</th><th>MB/s</th><th>errors</th><th>mean (ms)</th><th>p50 (ms)</th><th>p75 (ms)</th><th>p90 (ms)</th><th>p95 (ms)</th><th>p99 (ms)</th><th>p99.9 (ms)</th><th>p99.99 (ms)</th><th>max (ms)</th></tr>
{{- range .Rows}}
<tr><td class="k">{{.Side}}</td><td>{{.Records}}</td><td>{{.RecordsPerSec}}</td><td>{{.MBPerSec}}</td><td>{{.Errors}}</td><td>{{.Mean}}</td><td>{{.P50}}</td><td>{{.P75}}</td><td>{{.P90}}</td><td>{{.P95}}</td><td>{{.P99}}</td><td>{{.P999}}</td><td>{{.P9999}}</td><td>{{.Max}}</td></tr>
{{- end}}
</table>
{{- if .Stability}}
<table id="stability">
<tr><th class="k">throughput stability</th><th>seconds</th><th>min rec/s</th><th>mean rec/s</th><th>max rec/s</th><th>stddev rec/s</th><th>cv</th><th>min MB/s</th><th>mean MB/s</th><th>max MB/s</th><th>stddev MB/s</th></tr>
{{- range .Stability}}
<tr><td class="k">{{.Side}}</td><td>{{.Samples}}</td><td>{{.MinRec}}</td><td>{{.MeanRec}}</td><td>{{.MaxRec}}</td><td>{{.SDRec}}</td><td>{{.CV}}</td><td>{{.MinMB}}</td><td>{{.MeanMB}}</td><td>{{.MaxMB}}</td><td>{{.SDMB}}</td></tr>
{{- end}}
</table>
{{- end}}
<p class="meta">Stability is over the measured phase's full seconds (the catch-up's consume side from the consumers' start); cv = stddev / mean. Publish latency runs from a record's intended send time (open-loop) to its acknowledgement; end-to-end from the record timestamp to its receipt by a consumer. MB/s counts keys and values, 10^6 bytes per MB.</p>
{{- end}}
<h2>Charts</h2>
{{- range .Charts}}
<figure id="chart-{{.Name}}">
{{.SVG}}
<figcaption>{{.Caption}}</figcaption>
</figure>
{{- end}}
{{- if .Palette}}
<p class="meta" id="palette">Series colours (each used by one chart only):
{{- range .Palette}} <span class="swatch" style="background: {{.Color}}"></span> {{.Chart}}/{{.Series}} {{.Color}};{{end}}</p>
{{- end}}
{{- if not .IsCompare}}
{{- if .CatchUp}}
<h2>Catch-up read</h2>
<table id="catchup">{{range .CatchUp}}<tr><td class="k">{{.K}}</td><td>{{.V}}</td></tr>{{end}}</table>
{{- end}}
<h2>Broker resources</h2>
{{- if .Broker}}
<table id="broker">{{range .Broker}}<tr><td class="k">{{.K}}</td><td>{{.V}}</td></tr>{{end}}</table>
{{- else}}
<p id="broker-missing"><b>{{.BrokerNote}}</b></p>
{{- end}}
{{- if .Cost}}
<h2>Object-store cost</h2>
<table id="cost">{{range .Cost}}<tr><td class="k">{{.K}}</td><td>{{.V}}</td></tr>{{end}}</table>
{{- else}}
<p id="cost-missing">{{.CostNote}}</p>
{{- end}}
{{- if .Machine}}
<h2>Machine limits (same run)</h2>
<table id="machine">{{range .Machine}}<tr><td class="k">{{.K}}</td><td>{{.V}}</td></tr>{{end}}</table>
{{- end}}
<h2>Environment</h2>
<table id="environment">{{range .Env}}<tr><td class="k">{{.K}}</td><td class="k">{{.V}}</td></tr>{{end}}</table>
<h2>Workload as run</h2>
<table id="workload">{{range .Workload}}<tr><td class="k">{{.K}}</td><td class="k">{{.V}}</td></tr>{{end}}</table>
<h2>Errors</h2>
{{- if .Errors}}
<ul class="errors" id="errors">{{range .Errors}}<li>{{.}}</li>{{end}}</ul>
{{- else}}
<p id="errors">none</p>
{{- end}}
{{- if .Notes}}
<h2>Notes</h2>
<ul id="notes">{{range .Notes}}<li>{{.}}</li>{{end}}</ul>
{{- end}}
{{- end}}
</body>
</html>
`))
