/** Hangar's version, as in package.json (a test checks they agree); the core cannot read files on Workers. */
export const HANGAR_VERSION = "0.1.0";
