"""What users build flows with: pure Python, no Spark imported."""
