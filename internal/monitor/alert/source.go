package alert

import (
	"context"
	"time"

	"github.com/lightpath/lightpath/internal/monitor/repo"
)

// RepoSource reads rules' series from the repository: the samples of the
// finest tier that covers the window.
func RepoSource(rp *repo.Repo) Source {
	return func(ctx context.Context, name string, match map[string]string, start, end time.Time) ([]Series, error) {
		ss, err := rp.Query(ctx, repo.Query{Name: name, Match: match, Start: start, End: end, Tier: -1})
		if err != nil {
			return nil, err
		}
		out := make([]Series, len(ss))
		for i, s := range ss {
			out[i].Labels = s.Labels
			out[i].T = make([]int64, len(s.Points))
			out[i].V = make([]float64, len(s.Points))
			for j, p := range s.Points {
				out[i].T[j], out[i].V[j] = p.T, p.V
			}
		}
		return out, nil
	}
}
