"""Great Expectations suites for every xembed table and the runner that validates them."""
