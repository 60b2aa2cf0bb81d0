// Testbench for varint_encoder and varint_decoder, driven by vectors that
// the Rust encoder writes (crates/cornflakes-tests/tests/hw_varint.rs).
//
// One vector per line, all fields hex:
//   kind zigzag value len bytes avail ok incomplete malformed
// kind 0: `value` must encode to `bytes`/`len`, and decoding `bytes`
//         (with exactly `len` bytes available, and with ten) must give
//         `value` back.
// kind 1: decoding `bytes` with `avail` bytes must give the flags, and when
//         ok, `value` and `len`.
// Prints "varint: N vectors, F failures" and finishes.
`timescale 1ns / 1ps
`default_nettype none

module tb_varint;
    reg  [63:0] value;
    reg         zigzag;
    wire [79:0] enc_bytes;
    wire [3:0]  enc_len;

    reg  [79:0] dec_in;
    reg  [3:0]  dec_avail;
    wire [63:0] dec_value;
    wire [3:0]  dec_len;
    wire        dec_ok, dec_incomplete, dec_malformed;

    varint_encoder enc (.value(value), .zigzag(zigzag), .bytes(enc_bytes), .len(enc_len));
    varint_decoder dec (.bytes(dec_in), .avail(dec_avail), .zigzag(zigzag), .value(dec_value),
                        .len(dec_len), .ok(dec_ok), .incomplete(dec_incomplete), .malformed(dec_malformed));

    integer fd, n, vectors, failures;
    reg [3:0]   kind, zz, want_len, avail;
    reg [63:0]  want_value;
    reg [79:0]  want_bytes;
    reg [3:0]   want_ok, want_inc, want_mal;
    reg [1023:0] path;

    task fail(input [8*32-1:0] what);
        begin
            failures = failures + 1;
            if (failures <= 20)
                $display("FAIL %0s: kind %0d zigzag %0d value %h bytes %h len %0d | enc %h/%0d dec %h/%0d ok %b inc %b mal %b",
                         what, kind, zz, want_value, want_bytes, want_len, enc_bytes, enc_len,
                         dec_value, dec_len, dec_ok, dec_incomplete, dec_malformed);
        end
    endtask

    initial begin
        if (!$value$plusargs("vectors=%s", path)) begin
            $display("usage: vvp sim +vectors=FILE");
            $finish;
        end
        fd = $fopen(path, "r");
        if (fd == 0) begin
            $display("cannot open %0s", path);
            $finish;
        end
        vectors = 0;
        failures = 0;
        while (!$feof(fd)) begin
            n = $fscanf(fd, "%h %h %h %h %h %h %h %h %h\n", kind, zz, want_value, want_len, want_bytes,
                        avail, want_ok, want_inc, want_mal);
            if (n == 9) begin
                vectors = vectors + 1;
                zigzag = zz[0];
                if (kind == 0) begin
                    value = want_value;
                    dec_in = want_bytes;
                    dec_avail = want_len;
                    #1;
                    if (enc_bytes !== want_bytes || enc_len !== want_len) fail("encode");
                    if (!dec_ok || dec_value !== want_value || dec_len !== want_len) fail("decode exact");
                    dec_avail = 4'd10;
                    #1;
                    if (!dec_ok || dec_value !== want_value || dec_len !== want_len) fail("decode padded");
                end else begin
                    value = 64'd0;
                    dec_in = want_bytes;
                    dec_avail = avail;
                    #1;
                    if (dec_ok !== want_ok[0] || dec_incomplete !== want_inc[0] || dec_malformed !== want_mal[0])
                        fail("decode flags");
                    else if (dec_ok && (dec_value !== want_value || dec_len !== want_len)) fail("decode value");
                end
            end else if (n > 0) begin
                $display("bad vector line after %0d vectors", vectors);
                failures = failures + 1;
                $finish;
            end else begin
                n = $fgetc(fd);
            end
        end
        $fclose(fd);
        $display("varint: %0d vectors, %0d failures", vectors, failures);
        $finish;
    end
endmodule

`default_nettype wire
