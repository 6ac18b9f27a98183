"""The wire's vocabulary and shapes, with no server imports: the choices a request names
(`choices`: methods, granularities, scoring modes, populations), the search request
(`requests`, on the bodies' rules of `bodies` and a filter's grammar, `filters`) and every
answer of the service (`answers`, `explanations`), defined once. The service validates
requests and declares its responses with these models (`app.schemas` builds the answers from
the search's results), the search layer ranks by the request, and the clients read the
service's answers into them (`docsim.client`). Importing it loads pydantic and nothing else."""
