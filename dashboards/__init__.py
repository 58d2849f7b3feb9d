"""Web pages (served by `zoo serve`) and the weekly coverage report."""
