package server

import (
	"bytes"
	"context"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/session"
	"github.com/cairn-db/cairn/tablet"
)

// The node's /metrics, served by prometheus/client_golang from one
// registry per node: the latency histograms below, the Go runtime and
// process collectors, and the node's counters and gauges (Server.metrics'
// text, the older hand-written exposition, parsed into the same
// gathering so that names clash loudly rather than twice).

// latencyBuckets span 50 µs to about 26 s, doubling: a point read on one
// node to a statement stuck behind a lock.
var latencyBuckets = prometheus.ExponentialBuckets(50e-6, 2, 20)

// nodeMetrics are a node's histograms and the registry that holds them.
type nodeMetrics struct {
	reg        *prometheus.Registry
	statements *prometheus.HistogramVec
	// byKind holds statements' histogram of each kind seen
	// (statementObserver).
	byKind     sync.Map
	kv         *prometheus.HistogramVec
	raftCommit prometheus.Histogram
	lockWait   prometheus.Histogram
	lockHold   prometheus.Histogram
	// validInstalls counts validation cache installs by result.
	validInstalls *prometheus.CounterVec
	// series is the recent statement rate and latency (timeseries.go).
	series series
}

func newNodeMetrics() *nodeMetrics {
	m := &nodeMetrics{
		reg: prometheus.NewRegistry(),
		statements: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "cairn_sql_statement_duration_seconds",
			Help:    "Latency of SQL statements that completed on this node, by type (select, insert, update, delete, ddl, transaction, other).",
			Buckets: latencyBuckets,
		}, []string{"type"}),
		kv: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "cairn_kv_request_duration_seconds",
			Help:    "Latency of KV batches this node's SQL layer sent, by whether they write (read, write), retries and lock waits included.",
			Buckets: latencyBuckets,
		}, []string{"kind"}),
		raftCommit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "cairn_raft_commit_duration_seconds",
			Help:    "Time from proposing a replicated command on this node to applying it (a leaseholder's write through raft).",
			Buckets: latencyBuckets,
		}),
		lockWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "cairn_lock_wait_duration_seconds",
			Help:    "Time batches waited for other transactions' locks on this node's replicas.",
			Buckets: latencyBuckets,
		}),
		lockHold: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "cairn_lock_contended_hold_seconds",
			Help:    "Time an unreplicated row lock (an UPDATE's) that another request waited for was held on this node's replicas, from its acquisition to its release.",
			Buckets: latencyBuckets,
		}),
	}
	m.validInstalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cairn_validation_cache_installs_total",
		Help: "Newest versions a check read and offered to a replica's validation cache on this node, by whether the cache took them (result=installed) or refused them for a write applied meanwhile (result=refused).",
	}, []string{"result"})
	m.reg.MustRegister(m.statements, m.kv, m.raftCommit, m.lockWait, m.lockHold, m.validInstalls,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// statementObserver is session.Config.StatementObserver (its kinds are
// session.StatementKind's).
// The histogram of each kind is looked up once and kept (byKind):
// WithLabelValues hashed the label and allocated for every statement.
// A prepared statement's Execute keeps what it returns (the twentieth
// session: the sync.Map was looked up for every statement).
func (m *nodeMetrics) statementObserver(kind string) session.LatencyObserver {
	o, ok := m.byKind.Load(kind)
	if !ok {
		o, _ = m.byKind.LoadOrStore(kind, m.statements.WithLabelValues(kind))
	}
	return o.(prometheus.Observer)
}

// tabletObservers feed the raft commit, lock wait and lock hold
// histograms and the validation cache's install counts.
func (m *nodeMetrics) tabletObservers() *tablet.Observers {
	installedC, refusedC := m.validInstalls.WithLabelValues("installed"), m.validInstalls.WithLabelValues("refused")
	return &tablet.Observers{
		RaftCommit: func(d time.Duration) { m.raftCommit.Observe(d.Seconds()) },
		LockWait:   func(d time.Duration) { m.lockWait.Observe(d.Seconds()) },
		LockHold:   func(d time.Duration) { m.lockHold.Observe(d.Seconds()) },
		ValidInstall: func(installed bool) {
			if installed {
				installedC.Inc()
			} else {
				refusedC.Inc()
			}
		},
	}
}

// timedSender observes the latency of every batch sent through it.
type timedSender struct {
	inner       kvpb.Sender
	read, write prometheus.Observer
}

func (m *nodeMetrics) timed(inner kvpb.Sender) kvpb.Sender {
	return &timedSender{inner: inner, read: m.kv.WithLabelValues("read"), write: m.kv.WithLabelValues("write")}
}

func (t *timedSender) Send(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
	start := time.Now()
	br, err := t.inner.Send(ctx, ba)
	if ba.IsReadOnly() {
		t.read.Observe(time.Since(start).Seconds())
	} else {
		t.write.Observe(time.Since(start).Seconds())
	}
	return br, err
}

// metricsHandler serves /metrics: the registry and the node's
// hand-written counters, in whichever format the scraper asks for.
func (s *Server) metricsHandler() http.Handler {
	legacy := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		var b bytes.Buffer
		s.writeMetrics(&b)
		var p expfmt.TextParser
		fams, err := p.TextToMetricFamilies(&b)
		if err != nil {
			return nil, err
		}
		out := make([]*dto.MetricFamily, 0, len(fams))
		for _, f := range fams {
			out = append(out, f)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
		return out, nil
	})
	return promhttp.HandlerFor(prometheus.Gatherers{s.obs.reg, legacy}, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}
