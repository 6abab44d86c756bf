package main

import (
	"fmt"
	"image/color"
	"os"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// colourOf gives each kind of measurement its colour; the algorithm is told
// by the dashes (Bully solid, Ring dashed), the peer is black.
func colourOf(s series) color.Color {
	switch {
	case s.Algorithm == "raft" || s.Figure == "peer":
		return color.Black
	case s.Figure == "handover" && strings.Contains(s.Name, "transfer"):
		return color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}
	case s.Figure == "handover":
		return color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
	case strings.Contains(s.Name, "silent"):
		return color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	default:
		return color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	}
}

// chart draws the empirical distribution (ECDF) of every charted series on
// a logarithmic time axis, with the targets as dashed lines.
func chart(files []file, path string) error {
	p := plot.New()
	p.Title.Text = "Failover and handover: share of trials done within a time"
	p.X.Label.Text = "time until every survivor names the new leader (ms, log scale)"
	p.Y.Label.Text = "share of trials"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Min, p.Y.Max = 0, 1
	// The legend goes under the plot, where it cannot hide a line.
	leg := plot.NewLegend()
	leg.Top, leg.Left = true, true
	leg.XOffs = 0.6 * vg.Inch
	p.Add(plotter.NewGrid())
	lo, hi := 1e9, 0.0
	i := 0
	for _, f := range files {
		for _, s := range f.Series {
			if !s.Chart || len(s.Samples) == 0 {
				continue
			}
			xs := slices.Clone(s.Samples)
			slices.Sort(xs)
			lo, hi = min(lo, xs[0]), max(hi, xs[len(xs)-1])
			pts := make(plotter.XYs, 0, 2*len(xs))
			for k, x := range xs {
				pts = append(pts, plotter.XY{X: x, Y: float64(k) / float64(len(xs))}, plotter.XY{X: x, Y: float64(k+1) / float64(len(xs))})
			}
			l, err := plotter.NewLine(pts)
			if err != nil {
				return err
			}
			l.Color = colourOf(s)
			l.Width = vg.Points(1.5)
			if s.Algorithm == "ring" {
				l.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
			}
			p.Add(l)
			label := s.Name
			if s.Algorithm != "" && s.Algorithm != "raft" {
				label = fmt.Sprintf("edge-agent %s: %s", s.Algorithm, s.Name)
			}
			leg.Add(fmt.Sprintf("%s (%d trials)", label, len(xs)), l)
			i++
		}
	}
	if i == 0 {
		return fmt.Errorf("no series to chart")
	}
	for _, t := range []struct {
		ms    float64
		label string
	}{{50, "fast-path p99 target 50 ms"}, {310, "heartbeat-path p99 target 310 ms"}, {20, "handover p99 target 20 ms"}} {
		l, err := plotter.NewLine(plotter.XYs{{X: t.ms, Y: 0}, {X: t.ms, Y: 1}})
		if err != nil {
			return err
		}
		l.Color = color.Gray{Y: 0x70}
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l)
		lbl, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: t.ms, Y: 0.02}}, Labels: []string{t.label}})
		if err != nil {
			return err
		}
		lbl.TextStyle[0].Rotation = 1.5708
		lbl.TextStyle[0].Color = color.Gray{Y: 0x50}
		lbl.TextStyle[0].XAlign = draw.XLeft
		lbl.TextStyle[0].YAlign = draw.YTop
		p.Add(lbl)
		lo, hi = min(lo, t.ms), max(hi, t.ms)
	}
	p.X.Min, p.X.Max = lo*0.8, hi*1.25

	const width, height = 10 * vg.Inch, 6.5 * vg.Inch
	legendHeight := vg.Length(i)*0.16*vg.Inch + 0.15*vg.Inch
	img := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(96))
	dc := draw.New(img)
	p.Draw(draw.Crop(dc, 0, 0, legendHeight, 0))
	leg.Draw(draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{Min: dc.Min, Max: vg.Point{X: dc.Max.X, Y: dc.Min.Y + legendHeight}}})
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
