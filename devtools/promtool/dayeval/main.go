// dayeval evaluates a rule file over a span of input series and then range queries over the result, with Prometheus's
// own engine, storage and rule groups, as `promtool test rules` does (cmd/promtool/unittest.go at v0.316.0: the same
// promqltest.LazyLoader, rules.Manager and Group.Eval at each evaluation), and prints every query's answer as JSON.
// gpulab renders its dashboard's picture from it (components/metrics/dashboard_picture.py).
//
//	dayeval < request.json > answers.json
//
// request: {"interval": "1m", "series": [["name{labels}", "values in promtool's notation"], ...], "ruleFile": path,
// "end": seconds (the rules run from 0 to it, every interval), "from": seconds (where the queries start), "step": seconds,
// "queries": [expr, ...]}; answers: one list per query of
// {"metric": {label: value}, "values": [[seconds, value], ...]}.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
)

type request struct {
	Interval string      `json:"interval"`
	Series   [][2]string `json:"series"`
	RuleFile string      `json:"ruleFile"`
	End      int64       `json:"end"`
	From     int64       `json:"from"`
	Step     int64       `json:"step"`
	Queries  []string    `json:"queries"`
}

type answer struct {
	Metric map[string]string `json:"metric"`
	Values [][2]float64      `json:"values"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "dayeval:", err)
		os.Exit(1)
	}
}

func run() error {
	var req request
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
		return err
	}
	interval, err := model.ParseDuration(req.Interval)
	if err != nil {
		return err
	}
	var load strings.Builder
	fmt.Fprintf(&load, "load %s\n", req.Interval)
	for _, s := range req.Series {
		fmt.Fprintf(&load, "  %s %s\n", s[0], s[1])
	}
	start := time.Unix(0, 0).UTC()
	suite, err := promqltest.NewLazyLoader(load.String(), promqltest.LazyLoaderOpts{
		EnableAtModifier: true, EnableNegativeOffset: true, StartTime: start,
	})
	if err != nil {
		return err
	}
	defer suite.Close()
	manager := rules.NewManager(&rules.ManagerOptions{
		QueryFunc:    rules.EngineQueryFunc(suite.QueryEngine(), suite.Storage()),
		AppendableV2: suite.Storage(),
		Context:      context.Background(),
		NotifyFunc:   func(context.Context, string, ...*rules.Alert) {},
		Logger:       promslog.NewNopLogger(),
	})
	groups, errs := manager.LoadGroups(time.Duration(interval), labels.EmptyLabels(), "", nil, false, req.RuleFile)
	if errs != nil {
		return errs[0]
	}
	end := start.Add(time.Duration(req.End) * time.Second)
	var failed error
	for ts := start; !ts.After(end); ts = ts.Add(time.Duration(interval)) {
		suite.WithSamplesTill(ts, func(err error) {
			if err != nil {
				failed = err
				return
			}
			// One group in gpulab's rule file (components/metrics/recording_rules.py); its rules run in order.
			for _, g := range groups {
				g.Eval(suite.Context(), ts)
				for _, r := range g.Rules() {
					if r.LastError() != nil && failed == nil {
						failed = fmt.Errorf("rule %s at %s: %w", r.Name(), ts.Sub(start), r.LastError())
					}
				}
			}
		})
		if failed != nil {
			return failed
		}
	}
	out := make([][]answer, 0, len(req.Queries))
	step := time.Duration(req.Step) * time.Second
	for _, expr := range req.Queries {
		from := start.Add(time.Duration(req.From) * time.Second)
		q, err := suite.QueryEngine().NewRangeQuery(suite.Context(), suite.Storage(), nil, expr, from, end, step)
		if err != nil {
			return fmt.Errorf("%s: %w", expr, err)
		}
		res := q.Exec(suite.Context())
		if res.Err != nil {
			return fmt.Errorf("%s: %w", expr, res.Err)
		}
		matrix, err := res.Matrix()
		if err != nil {
			return err
		}
		answers := []answer{}
		for _, series := range matrix {
			a := answer{Metric: series.Metric.Map(), Values: [][2]float64{}}
			for _, p := range series.Floats {
				a.Values = append(a.Values, [2]float64{float64(p.T) / 1000, p.F})
			}
			answers = append(answers, a)
		}
		out = append(out, answers)
		q.Close()
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}
