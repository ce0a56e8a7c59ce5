# torch-doctor's own flake: `nix run ./nix -- check`, `nix build ./nix`, `nix develop ./nix`.
# Version and dependencies are read from ../pyproject.toml, so this file rarely changes.
{
  description = "torch-doctor: find, explain and fix libtorch setups";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-25.11";

  outputs = { self, nixpkgs }:
    let
      systems = [ "x86_64-linux" "aarch64-linux" "x86_64-darwin" "aarch64-darwin" ];
      forAllSystems = nixpkgs.lib.genAttrs systems;
      pyproject = builtins.fromTOML (builtins.readFile ../pyproject.toml);

      # "click>=8.1" -> python3Packages.click; PyPI names are lower-cased with dashes in nixpkgs.
      pythonPackage = ps: requirement:
        let
          lib = nixpkgs.lib;
          name = builtins.head (builtins.match "[[:space:]]*([A-Za-z0-9_.-]+).*" requirement);
        in
        ps.${lib.toLower (lib.replaceStrings [ "_" "." ] [ "-" "-" ] name)};

      packageFor = system:
        let
          pkgs = nixpkgs.legacyPackages.${system};
          ps = pkgs.python3.pkgs;
        in
        # buildPythonPackage (not -Application) so python3.withPackages can import it in the devShell.
        ps.buildPythonPackage {
          pname = pyproject.project.name;
          version = pyproject.project.version;
          pyproject = true;
          # Only what the wheel is built from: editing tests or docs does not rebuild the package.
          src = pkgs.lib.fileset.toSource {
            root = ./..;
            fileset = pkgs.lib.fileset.unions [ ../pyproject.toml ../README.md ../doctor ../torchfn ];
          };
          build-system = [ ps.setuptools ];
          dependencies = map (pythonPackage ps) pyproject.project.dependencies;
          # The test suite needs real shells, compilers and the torch 2.13 wheel: `scripts/test`.
          doCheck = false;
          pythonImportsCheck = [ "doctor" "doctor.cli" ];
          meta = {
            description = pyproject.project.description;
            mainProgram = "doctor";
          };
        };
    in
    {
      packages = forAllSystems (system: rec {
        torch-doctor = packageFor system;
        default = torch-doctor;
      });

      devShells = forAllSystems (system:
        let
          pkgs = nixpkgs.legacyPackages.${system};
          torch-doctor = self.packages.${system}.torch-doctor;
          testDeps = ps: map (pythonPackage ps) pyproject.project.optional-dependencies.test;
        in
        {
          default = pkgs.mkShell {
            packages = [
              (pkgs.python3.withPackages (ps: [ torch-doctor ] ++ testDeps ps))
              # the tools the tests drive for real
              pkgs.bash pkgs.zsh pkgs.fish pkgs.shellcheck pkgs.nix pkgs.cmake pkgs.gcc pkgs.zip pkgs.unzip
            ];
            # Run from the checkout, the working tree wins over the installed copy.
            shellHook = ''
              if [ -f pyproject.toml ] && [ -d doctor ]; then
                export PYTHONPATH="$PWD''${PYTHONPATH:+:$PYTHONPATH}"
              fi
            '';
          };
        });
    };
}
