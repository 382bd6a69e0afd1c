"""The subsections of the page's "Experiments": one-off measurements by the scripts in
bench/experiments/, one module each."""
