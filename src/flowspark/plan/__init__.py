"""The validated logical plan: errors in a flow are found here, before Spark starts."""
