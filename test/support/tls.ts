import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { tempDir } from '../../src/common/temp-dir.fake.js';

/** A self-signed certificate for 127.0.0.1/localhost, made with the machine's openssl. */
export function makeSelfSignedCert(): { certFile: string; keyFile: string } {
  const dir = tempDir('ar-tls-');
  const certFile = join(dir, 'cert.pem');
  const keyFile = join(dir, 'key.pem');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '2',
      '-subj',
      '/CN=localhost',
      '-addext',
      'subjectAltName=IP:127.0.0.1,DNS:localhost',
      '-keyout',
      keyFile,
      '-out',
      certFile,
    ],
    { stdio: 'ignore' },
  );
  return { certFile, keyFile };
}
