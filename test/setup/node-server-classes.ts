// `npm run test:node-classes`: the in-process suite again, on the Request and Response classes `hangar serve`
// really runs with. @hono/node-server's listener puts its own in place of the platform's globals when it is made
// (runtime/node-listener.ts); making one here does the same for this test process.
import { getRequestListener } from "@hono/node-server";

getRequestListener(() => new Response(null));
