package main

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// plots writes xdp.png (Mpps by mode and frame size, xdpkit and C) and
// copy.png (GB/s by copy size for each copy method, hot and cold
// destination side by side).
func plots(r *Results, dir string) error {
	if len(r.XDP) > 0 {
		if err := plotXDP(r, filepath.Join(dir, "xdp.png")); err != nil {
			return err
		}
	}
	if r.Grid != nil {
		if err := plotGrid(r.Grid, filepath.Join(dir, "copy.png")); err != nil {
			return err
		}
	}
	return nil
}

func plotXDP(r *Results, path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("AF_XDP on veth, copy mode, Mpps counted outside the program (median of %d runs)", r.Runs)
	p.Y.Label.Text = "Mpps"
	var cv, gv plotter.Values
	var names []string
	for _, c := range r.XDP {
		cv = append(cv, c.CMedian)
		gv = append(gv, c.GoMedian)
		names = append(names, xdpCaseName(c))
	}
	w := vg.Points(16)
	cb, err := plotter.NewBarChart(cv, w)
	if err != nil {
		return err
	}
	cb.Color = color.RGBA{R: 0x55, G: 0x55, B: 0x55, A: 255}
	cb.Offset = -w / 2
	gb, err := plotter.NewBarChart(gv, w)
	if err != nil {
		return err
	}
	gb.Color = color.RGBA{R: 0x00, G: 0xad, B: 0xd8, A: 255} // Go blue
	gb.Offset = w / 2
	p.Add(cb, gb, plotter.NewGrid())
	p.Legend.Add("C (xdpbench)", cb)
	p.Legend.Add("xdpkit", gb)
	p.Legend.Top = true
	p.NominalX(names...)
	p.Y.Min = 0
	p.X.Tick.Label.Rotation = 0.6
	p.X.Tick.Label.XAlign = draw.XRight
	return p.Save(12*vg.Inch, 5*vg.Inch, path)
}

func plotGrid(g *Grid, path string) error {
	const rows, cols = 1, 2
	img := vgimg.New(12*vg.Inch, 4.5*vg.Inch)
	dc := draw.New(img)
	t := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 2,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	ps := make([][]*plot.Plot, rows)
	ps[0] = make([]*plot.Plot, cols)
	for i, cold := range []bool{false, true} {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("copy into a %s UMEM destination", temp(cold))
		p.X.Label.Text = "payload bytes (log2)"
		p.Y.Label.Text = "GB/s (median of rounds, layout " + gridLayouts[0].Name + ")"
		if g.Starts > 1 {
			// Each cell's figures are those of one of its starts (combineStarts).
			p.Y.Label.Text = "GB/s (median of rounds, layout " + gridLayouts[0].Name + ", a cell's median start)"
		}
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.TickerFunc(func(min, max float64) []plot.Tick {
			var ts []plot.Tick
			for _, s := range gridSizes {
				ts = append(ts, plot.Tick{Value: float64(s), Label: fmt.Sprint(s)})
			}
			return ts
		})
		series := []struct {
			name    string
			method  string
			offload bool
		}{
			{"copy", "copy", true}, {"nt", "nt", true}, {"fused (copy+csum)", "fused", false},
			{"copy+sum", "copy+sum", false}, {"nt+sum", "nt+sum", false},
			{"auto, offload", "auto", true}, {"auto, no offload", "auto", false},
		}
		for j, s := range series {
			var xy plotter.XYs
			for _, c := range g.Cells {
				if c.Cold != cold || c.Offload != s.offload || c.Layout != gridLayouts[0].Name {
					continue
				}
				if f, ok := c.Methods[s.method]; ok {
					xy = append(xy, plotter.XY{X: float64(c.Size), Y: f.Median})
				}
			}
			if len(xy) == 0 {
				continue
			}
			l, pts, err := plotter.NewLinePoints(xy)
			if err != nil {
				return err
			}
			l.Color = plotutil.Color(j)
			pts.Color = plotutil.Color(j)
			pts.Shape = plotutil.Shape(j)
			if s.method == "auto" {
				l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
				l.Width = vg.Points(2)
			}
			p.Add(l, pts)
			p.Legend.Add(s.name, l, pts)
		}
		p.Add(plotter.NewGrid())
		p.Legend.Top = true
		p.Legend.Left = true
		p.Y.Min = 0
		ps[0][i] = p
	}
	canvases := plot.Align(ps, t, dc)
	for j := 0; j < cols; j++ {
		ps[0][j].Draw(canvases[0][j])
	}
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
