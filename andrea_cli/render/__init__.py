"""One module per report for people: Rich tables, the terminal heatmap, PNG plots. JSON is printed by cli.py."""
