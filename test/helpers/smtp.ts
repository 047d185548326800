// A real SMTP server on loopback (the smtp-server package) that keeps every message it accepts, and can refuse the
// next few with a temporary error (451) to show the outbox retrying.
import type { AddressInfo } from "node:net";
import { SMTPServer } from "smtp-server";

export interface ReceivedMail {
  from: string | null;
  to: string[];
  /** The raw message, headers and body, with quoted-printable soft breaks undone. */
  raw: string;
}

export interface SmtpSink {
  port: number;
  received: ReceivedMail[];
  logins: string[];
  /** Refuse the next `n` messages with 451. */
  refuseNext(n: number): void;
  close(): Promise<void>;
}

/** Undoes quoted-printable soft line breaks and =XX escapes, so a test can find a long link in the body. */
function unQuotedPrintable(text: string): string {
  return text.replace(/=\r?\n/g, "").replace(/=([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
}

export async function startSmtpSink(): Promise<SmtpSink> {
  const received: ReceivedMail[] = [];
  const logins: string[] = [];
  let refusals = 0;
  const server = new SMTPServer({
    disabledCommands: ["STARTTLS"],
    allowInsecureAuth: true,
    authOptional: true,
    logger: false,
    onAuth(auth, _session, callback) {
      logins.push(`${auth.username}:${auth.password}`);
      callback(null, { user: auth.username });
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () => {
        if (refusals > 0) {
          refusals--;
          const err = Object.assign(new Error("try again later"), { responseCode: 451 });
          return callback(err);
        }
        received.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : null,
          to: session.envelope.rcptTo.map((r) => r.address),
          raw: unQuotedPrintable(Buffer.concat(chunks).toString("utf8")),
        });
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.server.address() as AddressInfo).port;
  return {
    port,
    received,
    logins,
    refuseNext(n) {
      refusals = n;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
