# frozen_string_literal: true

require "openssl"

# A self-signed certificate for localhost (cert.pem, key.pem in `dir`), for specs that run a TLS
# redis-server.
module Certificates
  def write_certificate(dir)
    key = OpenSSL::PKey::RSA.new(2048)
    cert = OpenSSL::X509::Certificate.new
    cert.version = 2
    cert.serial = 1
    cert.subject = cert.issuer = OpenSSL::X509::Name.parse("/CN=localhost")
    cert.public_key = key.public_key
    cert.not_before = Time.now - 60
    cert.not_after = Time.now + 3600
    ext = OpenSSL::X509::ExtensionFactory.new(cert, cert)
    cert.add_extension(ext.create_extension("basicConstraints", "CA:TRUE", true))
    cert.add_extension(ext.create_extension("subjectAltName", "DNS:localhost,IP:127.0.0.1"))
    cert.sign(key, OpenSSL::Digest.new("SHA256"))
    File.write("#{dir}/key.pem", key.to_pem)
    File.write("#{dir}/cert.pem", cert.to_pem)
  end
end

RSpec.configure { |c| c.include Certificates }
