"""``python -m benchmarks.run --plot DIR`` draws its figures as PNG files
(benchmarks/plot.py), also when Zaqar's driver failed a measurement."""

from benchmarks import plot

PNG = b'\x89PNG\r\n\x1a\n'


def test_plots_are_png_files(tmp_path):
    figures = {
        'Redis': {'throughput': {'post (10/post)': (900.0, 1000.0)},
                  'latency': [(0, 0.003, 0.004), (1000, 0.004, 0.037)]},
        'Swift': {'throughput': {'post (10/post)': (50.0, 40.0)},
                  'latency': [(0, 0.02, 0.03), (200, 0.02, None)]}}
    paths = plot.draw(figures, str(tmp_path / 'plots'))
    assert [p.rsplit('/', 1)[1] for p in paths] == [plot.LATENCY,
                                                     plot.THROUGHPUT]
    for path in paths:
        with open(path, 'rb') as png:
            assert png.read(8) == PNG
