"""The wire's vocabulary and shapes, with no server imports: the choices a request names
(`choices`: methods, granularities, scoring modes, populations) and every answer of the
service (`answers`, `explanations`), defined once. The service declares its responses with
these models (`app.schemas` builds them from the search's results), and the client reads the
service's answers into them (`docsim.client`). Importing it loads pydantic and nothing else."""
