// The part of s3rver 3.7's API the test harness uses (the package ships no types).
declare module "s3rver" {
  import type { IncomingMessage, ServerResponse } from "node:http";
  interface S3rverOptions {
    silent?: boolean;
    directory: string;
    configureBuckets?: Array<{ name: string; configs: Array<string | Buffer> }>;
  }
  export default class S3rver {
    constructor(options: S3rverOptions);
    configureBuckets(): Promise<void>;
    callback(): (req: IncomingMessage, res: ServerResponse) => Promise<void>;
  }
}
